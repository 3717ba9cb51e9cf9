"""The built-in devices and models, each figure with its source: datasheets for devices, each model's
config.json on Hugging Face for its shape. A new GPU is one entry here (or in a `--presets` file)."""

from __future__ import annotations

from harness.devices.gpu import Accelerator
from harness.devices.models import ModelSpec
from harness.devices.wafer import AsicAccelerator

DEVICES = (
    # tflops, hbm_tbps, memory_gb, and the fp8/int8/FP4 peaks: dense (not sparse) figures of NVIDIA's A100,
    # H100 SXM, H200 and B200 datasheets and AMD's MI300X datasheet. reported_gib: the total the driver
    # reports (nvidia-smi's less what it keeps), as vLLM logs it. link_gbps, per direction: NVIDIA's
    # datasheets give NVLink both ways (A100 SXM: NVLink 3, 600 GB/s; H100 SXM and H200: NVLink 4, 900 GB/s;
    # B200: NVLink 5,
    # 1.8 TB/s); AMD's MI300X datasheet, 7 Infinity Fabric links of 64 GB/s each way to the other GPUs of a node
    # (448 GB/s, the peak of a one-shot all-reduce reading every peer at once). clock_mhz: boost clocks from
    # the datasheets (A100 1,410, H100 SXM and H200 1,980, MI300X 2,100); B200's is not published: Hopper's
    # assumed. eta_mem: fitted on vLLM's own latency benchmark (harness/sim/published.py); B200 and MI300X
    # have no published point of today's vLLM there and take the fitted devices' mean. board_w: each
    # datasheet's maximum power (TDP): A100 SXM 400 W, H100 SXM and H200 SXM 700 W, B200 (HGX) 1,000 W, MI300X
    # 750 W; a CS-3 system 23 kW (Cerebras: the CS-2's power).
    Accelerator("a100-80g", 312, 2.039, 80, int8_tops=624, reported_gib=79.15, link_gbps=300, link="nvlink",
                clock_mhz=1410, eta_mem=0.696, vllm_defaults=(256, 2048), board_w=400),
    Accelerator("h100-sxm", 989, 3.35, 80, fp8_tflops=1979, int8_tops=1979, reported_gib=79.19, link_gbps=450,
                link="nvlink", eta_mem=0.692, board_w=700),
    Accelerator("h200", 989, 4.8, 141, fp8_tflops=1979, int8_tops=1979, reported_gib=139.8, link_gbps=450,
                link="nvlink", eta_mem=0.601, board_w=700),
    Accelerator("b200", 2250, 8.0, 180, fp8_tflops=4500, int8_tops=4500, fp4_tflops=9000, reported_gib=178.4,
                link_gbps=900, link="nvlink", graph_cap=1024, board_w=1000),
    Accelerator("mi300x", 1307, 5.3, 192, fp8_tflops=2615, int8_tops=2615, reported_gib=191.98, link_gbps=448,
                link="xgmi", clock_mhz=2100, board_w=750),
    # Cerebras CS-3: one WSE-3 wafer with 44 GB of SRAM (Cerebras' WSE-3 specifications, March 2024);
    # per-stream decode fitted to the speeds Cerebras Inference reported at launch (2024-08-27): 1,800
    # tokens/s for Llama-3.1-8B and 450 for Llama-3.1-70B, which it served on four CS-3 systems (as the
    # weights require here). growth_per_seq and the prefill rate are not published: assumptions.
    AsicAccelerator("cerebras-cs3", decode_ms_per_b_params=0.0269, decode_ms=0.354, growth_per_seq=0.002,
                    prefill_tokens_per_s_8b=40_000, memory_gb=44, chips=1, device="CS-3 system (one wafer)",
                    board_w=23_000),
)

MODELS = (
    # (layers, hidden, q heads, kv heads, head_dim, parameters in billions, vocab) from each config.json
    # (meta-llama/…, Qwen/…, mistralai/…, deepseek-ai/…, openai/…); totals and active parameters from the
    # model cards.
    ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 8.03, 128256),
    ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 70.6, 128256),
    ModelSpec("llama-3.3-70b", 80, 8192, 64, 8, 128, 70.6, 128256),  # Llama-3.1-70B's shape, retrained
    ModelSpec("qwen2.5-7b", 28, 3584, 28, 4, 128, 7.62, 152064, max_model_len=32768, intermediate=18944),
    ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 128, 46.7, 32000, active_params_b=12.9, experts=8, top_k=2,
              max_model_len=32768),
    # Qwen3 MoE: 128 experts, 8 routed a token, no shared expert; max_position_embeddings 40,960
    ModelSpec("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 30.5, 151936, active_params_b=3.3, experts=128, top_k=8,
              intermediate=768, max_model_len=40960),
    ModelSpec("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 235.0, 151936, active_params_b=22.0, experts=128,
              top_k=8, intermediate=1536, max_model_len=40960),
    # DeepSeek-V3 (and R1, the same shape): 61 layers (the first 3 dense), 256 routed experts of width 2,048
    # and one shared, 8 routed a token; multi-head latent attention caching kv_lora_rank 512 +
    # qk_rope_head_dim 64 a token a layer; 128 heads of v_head_dim 128; shipped in fp8 (block-wise, 128 ×
    # 128). 671B without its multi-token-prediction layer, 37B active.
    ModelSpec("deepseek-v3", 61, 7168, 128, 128, 128, 671.0, 129280, active_params_b=37.0, experts=256, top_k=8,
              intermediate=2048, max_model_len=163840, weights="fp8", kv_latent=576, latent_rank=512, qk_rope=64),
    # gpt-oss: experts in MXFP4 (attention, router, embedding and head bf16, as shipped), 64 query heads of 64
    # over 8 kv heads; every other layer attends a 128-token window (its KV a window's a request, left out of
    # the per-token KV and reads). OpenAI's model card counts 20.91B / 116.83B in all and 3.61B / 5.13B active
    # without the embedding table (0.58B); here active includes it, as for every other model.
    ModelSpec("gpt-oss-20b", 24, 2880, 64, 8, 64, 20.91, 201088, active_params_b=3.61 + 0.58, experts=32, top_k=4,
              intermediate=2880, weights="fp4", quantised="experts", sliding_layers=12),
    ModelSpec("gpt-oss-120b", 36, 2880, 64, 8, 64, 116.83, 201088, active_params_b=5.13 + 0.58, experts=128,
              top_k=4, intermediate=2880, weights="fp4", quantised="experts", sliding_layers=18),
)
