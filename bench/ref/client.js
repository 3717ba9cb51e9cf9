// A minimal OpenAI streaming client — the reference a load generator's cost per token is measured against
// (bench/per_core.py): Node's built-in http with a keep-alive agent, the body split on blank lines, JSON.parse per
// event, a token counted where delta.content is non-empty. Nothing else.
//
//   node bench/ref/client.js URL --streams 64 --requests 640 --max-tokens 512          # closed loop
//   node bench/ref/client.js URL --streams 64 --requests 640 --stagger-ms 300          # users' first sends spread
//   node bench/ref/client.js URL --streams 1024 --requests 1024 --max-tokens 128       # all at once
//   node bench/ref/client.js URL --rate 400 --requests 2000 --max-tokens 8 --seed 1    # Poisson arrivals
//
// Prints one JSON object: per request {id, intended, sent, first, end, tokens} (CLOCK_MONOTONIC ns, as strings), the
// CPU it used from the first send to the last end (process.cpuUsage) and the tokens it counted.
//
// Two references, one file (`--clock`): `perf` (the default, "lean") stamps with performance.now(), a double;
// `hrtime` ("hrtime", the reference of issues 48–62) with process.hrtime.bigint(), a BigInt allocated per read —
// ~45% more CPU per token on this machine. Both print nanoseconds on the same clock.
'use strict';
const http = require('http');

const args = process.argv.slice(2);
const url = new URL(args[0].replace(/\/$/, '') + '/chat/completions');
function opt(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}
const STREAMS = opt('--streams', 64);
const REQUESTS = opt('--requests', 640);
const MAX_TOKENS = opt('--max-tokens', 512);
const RATE = opt('--rate', 0);
const STAGGER_MS = opt('--stagger-ms', 0); // closed loop: user k's first request k/streams of this after the start
let seed = opt('--seed', 1) >>> 0;
const CLOCK = args.includes('--clock') ? args[args.indexOf('--clock') + 1] : 'perf';
if (CLOCK !== 'perf' && CLOCK !== 'hrtime') throw new Error(`--clock: perf or hrtime, not ${CLOCK}`);

const agent = new http.Agent({keepAlive: true, maxSockets: RATE > 0 ? Infinity : STREAMS});
// perf: milliseconds as a double, turned into CLOCK_MONOTONIC ns only when printed (from one pair of readings)
const BASE_NS = process.hrtime.bigint();
const BASE_MS = performance.now();
const now = CLOCK === 'perf' ? () => performance.now() : () => process.hrtime.bigint();
const toNs = CLOCK === 'perf' ? (t) => (BASE_NS + BigInt(Math.round((t - BASE_MS) * 1e6))).toString()
                              : (t) => t.toString();
const after = CLOCK === 'perf' ? (t, ns) => t + ns / 1e6 : (t, ns) => t + BigInt(Math.round(ns));
const msUntil = CLOCK === 'perf' ? (t) => t - now() : (t) => Number(t - now()) / 1e6;
const records = [];

function one(i, intended) {
  return new Promise((resolve) => {
    const rec = {id: `ref-${i}`, intended, sent: null, first: null, end: null, tokens: 0, ok: false};
    const body = JSON.stringify({model: 'ref', max_tokens: MAX_TOKENS, stream: true,
                                 messages: [{role: 'user', content: 'hello '.repeat(16)}]});
    const req = http.request(url, {method: 'POST', agent, headers: {
      'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'X-Request-Id': rec.id}},
    (res) => {
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (text) => {
        const t = now();
        pending += text;
        let at;
        while ((at = pending.indexOf('\n\n')) >= 0) {
          const ev = pending.slice(0, at);
          pending = pending.slice(at + 2);
          if (!ev.startsWith('data: ')) continue;
          const data = ev.slice(6);
          if (data === '[DONE]') { rec.ok = true; continue; }
          const obj = JSON.parse(data);
          const choice = obj.choices && obj.choices[0];
          if (choice && choice.delta && choice.delta.content) {
            if (rec.first === null) rec.first = t;
            rec.tokens += 1;
          }
        }
      });
      res.on('end', () => { rec.end = now(); records.push(rec); resolve(); });
    });
    req.on('finish', () => { rec.sent = now(); }); // the request handed to the OS
    req.on('error', (e) => { rec.end = now(); rec.error = String(e); records.push(rec); resolve(); });
    req.end(body);
  });
}

function random() { // mulberry32: a seeded uniform in [0, 1)
  seed = (seed + 0x6D2B79F5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

async function main() {
  const cpu0 = process.cpuUsage();
  const t0 = now();
  if (RATE > 0) {
    const waits = [];
    let at = 0;
    for (let i = 0; i < REQUESTS; i++) {
      at += -Math.log(1 - random()) / RATE * 1e9;
      const due = after(t0, at);
      waits.push(new Promise((resolve) => {
        setTimeout(() => one(i, due).then(resolve), Math.max(0, msUntil(due)));
      }));
    }
    await Promise.all(waits);
  } else {
    let next = 0;
    const user = async (k) => {
      if (STAGGER_MS > 0) await new Promise((r) => setTimeout(r, STAGGER_MS * k / STREAMS));
      while (next < REQUESTS) {
        const i = next++;
        await one(i, now());
      }
    };
    await Promise.all(Array.from({length: Math.min(STREAMS, REQUESTS)}, (_, k) => user(k)));
  }
  const cpu = process.cpuUsage(cpu0);
  const tokens = records.reduce((a, r) => a + r.tokens, 0);
  const wall_s = (msUntil(t0) / -1e3);
  for (const r of records) {
    for (const k of ['intended', 'sent', 'first', 'end']) r[k] = r[k] === null ? null : toNs(r[k]);
  }
  process.stdout.write(JSON.stringify({cpu_s: (cpu.user + cpu.system) / 1e6, wall_s, tokens, records}) + '\n');
  agent.destroy();
}
main();
