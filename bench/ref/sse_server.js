// An OpenAI-compatible streaming server that writes one SSE event per token per socket write: the shape vLLM,
// SGLang and llama.cpp send at low load. For benchmarks of clients only (bench/per_core.py); loopback only.
//
//   node bench/ref/sse_server.js --ttft-ms 50 --itl-ms 10     # paced: first token after 50 ms, then every 10 ms
//   node bench/ref/sse_server.js --itl-ms 0 [--burst 8]       # zero delay: 1 (or 8) events a stream a loop turn
//   node bench/ref/sse_server.js --itl-ms 0 --shape vllm      # vLLM's event, pre-framed, one socket write each
//   node bench/ref/sse_server.js --itl-ms 0 --cap-tokens-per-s 130000   # zero delay, at most 130k tokens/s in all
//
// --shape plain (the default): a short event (`chatcmpl-ref`, model `ref`) written through Node's response, which
// frames each as an HTTP chunk. --shape vllm: the event vLLM's OpenAI server sends (a request's own 32-hex id, the
// Unix time, the model's full name, `system_fingerprint`, `logprobs: null`; ~230 bytes), each token's HTTP chunk
// (size line, event, CRLF) built once per stream and handed to the socket in one write — what an independent rig
// measured the harness on (issue 48).
//
// Prints {"port": N} on stdout once listening. Each request streams exactly max_tokens content tokens, a final
// chunk with finish_reason, a usage chunk and [DONE]. GET /log returns, per request, its id (X-Request-Id or a
// counter), when its body was read, when its first token and its last chunk were written, how many tokens it sent — times from
// CLOCK_MONOTONIC in ns (process.hrtime.bigint(), the clock of Python's time.monotonic_ns()): the ground truth
// a client's TTFT is checked against. GET /log?clear=1 empties it.
'use strict';
const http = require('http');

const args = process.argv.slice(2);
function opt(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}
const TTFT_MS = opt('--ttft-ms', 0);
const ITL_MS = opt('--itl-ms', 0);
const PORT = opt('--port', 0);
const BURST = opt('--burst', 1); // zero delay: writes per stream per loop turn, each its own socket write
// Zero delay: the server writes at most this many tokens a second in all (0: as fast as it goes), a round of one
// token a stream at a time — a server, not the client, that sets the pace, as in issue 48's rig (134k tokens/s).
const CAP = opt('--cap-tokens-per-s', 0);
const SHAPE = args.includes('--shape') ? args[args.indexOf('--shape') + 1] : 'plain';
if (!['plain', 'vllm'].includes(SHAPE)) throw new Error(`--shape ${SHAPE}: plain or vllm`);

const now = () => process.hrtime.bigint();
let log = [];
let counter = 0;
const active = new Set(); // zero-delay streams, written round-robin

function chunk(body) {
  return 'data: ' + JSON.stringify(body) + '\n\n';
}
function event(content, finish) {
  return chunk({id: 'chatcmpl-ref', object: 'chat.completion.chunk', created: 0, model: 'ref',
                choices: [{index: 0, delta: {content}, logprobs: null, finish_reason: finish}]});
}

// vLLM's chunk: one request's events, each a whole HTTP chunk, ready for one socket write.
function vllmFrames(model) {
  const head = {id: 'chatcmpl-' + require('crypto').randomBytes(16).toString('hex'), object: 'chat.completion.chunk',
                created: Math.floor(Date.now() / 1000), model, system_fingerprint: 'fp_vllm_0.11.0'};
  const frame = (extra) => {
    const data = Buffer.from(chunk({...head, ...extra}));
    return Buffer.concat([Buffer.from(data.length.toString(16) + '\r\n'), data, Buffer.from('\r\n')]);
  };
  const token = (content, finish) => frame({choices: [{index: 0, delta: {content}, logprobs: null,
                                                      finish_reason: finish}]});
  return {the: token(' the', null), word: token(' word', null), last: token('', 'length'),
          usage: (total) => frame({choices: [], usage: {prompt_tokens: 16, total_tokens: 16 + total,
                                                        completion_tokens: total}}),
          done: Buffer.from('e\r\ndata: [DONE]\n\n\r\n')};
}

function writer(res, body) {
  if (SHAPE === 'plain') {
    return {token: (k) => res.write(event(k % 7 === 0 ? ' the' : ' word', null)),
            end: (total) => {
              res.write(event('', 'length'));
              res.write(chunk({id: 'chatcmpl-ref', object: 'chat.completion.chunk', created: 0, model: 'ref',
                               choices: [], usage: {prompt_tokens: 16, completion_tokens: total,
                                                    total_tokens: 16 + total}}));
              res.end('data: [DONE]\n\n');
            }};
  }
  // Past the headers Node wrote (chunked), each frame goes straight to the socket; res.end() adds the last chunk.
  const f = vllmFrames(String(body.model || 'ref'));
  const socket = res.socket;
  return {token: (k) => socket.write(k % 7 === 0 ? f.the : f.word),
          end: (total) => { socket.write(f.last); socket.write(f.usage(total)); socket.write(f.done); res.end(); }};
}

function stream(req, res, body, entry) {
  const total = Math.max(1, Number(body.max_tokens) || 16);
  let sent = 0;
  res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
  res.flushHeaders();
  const out = writer(res, body);
  const one = () => {
    out.token(sent);
    if (sent === 0) entry.first = now().toString();
    sent += 1;
    entry.tokens = sent;
    if (sent < total) return false;
    out.end(total);
    entry.end = now().toString();
    return true;
  };
  if (ITL_MS <= 0) {
    const s = {one};
    setTimeout(() => { active.add(s); pump(); }, TTFT_MS);
    return;
  }
  const start = Date.now() + TTFT_MS;
  const tick = () => {
    if (one()) return;
    setTimeout(tick, Math.max(0, start + sent * ITL_MS - Date.now()));
  };
  setTimeout(tick, TTFT_MS);
}

let pumping = false;
function pump() {
  if (pumping) return;
  pumping = true;
  const start = now();
  let written = 0;
  const turn = () => {
    if (CAP > 0 && written > Number(now() - start) * CAP / 1e9) { setImmediate(turn); return; } // ahead of the cap
    written += active.size * BURST;
    for (const s of active) {
      for (let k = 0; k < BURST; k++) if (s.one()) { active.delete(s); break; }
    }
    if (active.size) setImmediate(turn); else pumping = false;
  };
  setImmediate(turn);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/v1/models')) {
    res.writeHead(200, {'Content-Type': 'application/json'});
    res.end(JSON.stringify({object: 'list', data: [{id: 'ref', object: 'model'}]}));
    return;
  }
  if (req.method === 'GET' && req.url.startsWith('/log')) {
    res.writeHead(200, {'Content-Type': 'application/json'});
    res.end(JSON.stringify(log));
    if (req.url.includes('clear=1')) log = [];
    return;
  }
  if (req.method !== 'POST') { res.writeHead(404); res.end(); return; }
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    const entry = {id: req.headers['x-request-id'] || String(counter++), recv: now().toString(), first: null,
                   end: null, tokens: 0};
    log.push(entry);
    let body;
    try { body = JSON.parse(Buffer.concat(parts).toString()); } catch (e) { res.writeHead(400); res.end(); return; }
    stream(req, res, body, entry);
  });
});
server.keepAliveTimeout = 120000;
server.headersTimeout = 130000;
server.listen(PORT, '127.0.0.1', 4096, () => {
  process.stdout.write(JSON.stringify({port: server.address().port}) + '\n');
});
