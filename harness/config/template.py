"""The commented scenario `harness init` writes: every common field with what it does, ready to edit."""

from __future__ import annotations

TEMPLATE = """\
# A harness scenario. Run it with:  harness run {path}
# Every field: docs/scenarios.md. Durations take units everywhere: 30s, 5m, 500ms.
name: my-scenario
seed: 0                          # arrivals and prompts; every run still draws its own prompts (prompt_reuse)

endpoint:
  url: {url}                     # OpenAI base URL ending in /v1; null: the bundled simulator
  model: {model}                 # null: the endpoint's first served model
  api: chat                      # or completions, responses, messages, embeddings (docs/apis.md)
  api_key_env: null              # name of the variable holding the key (default OPENAI_API_KEY)

workload:
  prompt_tokens: 512             # or {{dist: lognormal, median: 512, sigma: 0.5}}
  output_tokens: 128
  tokenizer: null                # null: the endpoint's /tokenize where it counts; tokenizer.json, "server", "words"

slo:                             # goodput counts the requests within every limit given
  ttft_ms: 500ms
  tpot_ms: 50ms

phases:
  - name: interactive            # open loop: requests arrive when they arrive
    load: {{type: poisson, rate: 4, duration_s: 30s}}
  - name: training-batch         # the same workload as fixed batches: send 64, wait for all, repeat
    load: {{type: batch, size: 64, batches: 2}}
"""


def scenario_template(path: str, url: str | None, model: str | None) -> str:
    return TEMPLATE.format(path=path, url=url or "null", model=model or "null")
