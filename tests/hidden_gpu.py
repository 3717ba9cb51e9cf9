"""The hidden GPU the twin tests fit without being told of it (tests/e2e/test_twin.py, test_twin_one.py), and its
roofline by hand."""

HIDDEN = "accelerators:\n  hidden-gpu: {tflops: 400, hbm_tbps: 3.2, memory_gb: 24}\n"
# The hidden device's roofline, by hand (design brief §5 defaults; Llama-3.1-8B reads 7.5047e9 × 2 B a step):
DECODE_FIXED_MS = 7.5047e9 * 2 / (3.2e12 * 0.75) * 1e3 + 32 * 0.025 + 1.25  # weights + launches + t0 = 8.30
PER_KTOKEN_MS = 2 * 7.5047e9 * 1000 / (400e12 * 0.62) * 1e3  # 60.5


def prompt_alone_ms(tokens: int) -> float:
    """The hidden device's step processing one prompt of `tokens` tokens and nothing else: its roofline, as the
    simulator serving it prices it (a hand formula would repeat the model)."""
    from harness.devices.catalogue import catalogue
    from harness.devices.gpu import Accelerator
    from harness.devices.roofline import RooflineModel
    from harness.devices.step import StepLoad

    device = RooflineModel(Accelerator("hidden-gpu", tflops=400, hbm_tbps=3.2, memory_gb=24),
                           catalogue().models["llama-3.1-8b"])
    return device.step_cost(StepLoad(tokens=tokens, seqs=1, decodes=0, prefill_attn=tokens * tokens / 2)).seconds * 1e3
