"""A fitted twin's shape checked against what an engine can do (`harness sim twin`'s findings), on step rows
made by hand: [step ms, sequences, context/1000, prompt tokens/1000, prompts in the step]."""

from __future__ import annotations

import re

import numpy as np

from harness.devices.fitted import FittedAccelerator
from harness.twin.checks import confirmed, decode_findings, prompt_findings, prompt_ratio

ISSUE_44 = [15.5, 34.6, 58.3, 73.0, 74.9, 116.0]  # the fit on Poisson 0.2 and 0.5 req/s that missed by +134%
LLAMA = [24.4, 31.8, 51.5, 46.2, 68.7, 61.9, 83.2, 78.4]  # llama-server, --kv-unified: even batches tile better


def twin(table: list[float], per_seq: float = 10.0, per_ktoken: float = 2500.0) -> FittedAccelerator:
    return FittedAccelerator("t", step_ms=0.0, weights_ms=0.0, per_ktoken_ms=per_ktoken, per_seq_ms=per_seq,
                             per_context_ktoken_ms=0.0, kv_tokens=100_000, decode_ms=table)


def decode_rows(medians: dict[int, float], spread: float = 0.02, count: int = 40, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [[ms * (1 + spread * rng.standard_normal()), n, 0.2, 0.0, 0.0]
            for n, ms in medians.items() for _ in range(count)]
    return np.array(rows)


def codes(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.code for f in findings]


def test_a_batch_costing_more_than_its_requests_alone_is_named() -> None:
    rows = decode_rows(dict(enumerate(ISSUE_44, 1)))
    found = decode_findings(twin(ISSUE_44), rows)
    assert "decode-superlinear" in codes(found)
    assert "3 sequences costs 58.3 ms, more than 3 steps of one" in str(found[0])


def test_a_batch_size_measured_clean_is_the_engines_however_it_rises() -> None:
    """llama-server on 2 cores (--kv-unified): a closed loop of three decodes in 54.7 ms, one in 15.0."""
    table = [15.0, 32.8, 54.7, 47.2]
    ramp = decode_rows({3: 53.2})
    assert confirmed(ramp, 3) is not None and abs((confirmed(ramp, 3) or 0) - 53.2) < 2.0
    assert confirmed(ramp, 2) is None
    clean = {n: table[n - 1] for n in (1, 2, 3, 4)}
    assert decode_findings(twin(table, per_seq=5.0), decode_rows(dict(enumerate(table, 1))), clean) == []
    # A clean closed loop of three that stepped in 40 ms does not confirm a table's 54.7
    found = decode_findings(twin(table, per_seq=5.0), decode_rows(dict(enumerate(table, 1))), {**clean, 3: 40.0})
    assert codes(found) == ["decode-superlinear"] and "3 sequences costs 54.7 ms" in str(found[0])


def test_llama_servers_own_table_is_no_finding() -> None:
    """Its dips (51.5 → 46.2 ms, 10%) are the engine's, and no step of n costs n steps of one."""
    assert decode_findings(twin(LLAMA, per_seq=0.0), decode_rows(dict(enumerate(LLAMA, 1)))) == []


def test_past_the_table_a_sequence_costing_more_than_a_whole_step_is_superlinear() -> None:
    table = [10.0, 12.0, 14.0]
    assert "decode-superlinear" in codes(decode_findings(twin(table, per_seq=20.0), decode_rows({1: 10.0})))
    assert decode_findings(twin(table, per_seq=2.0), decode_rows({1: 10.0})) == []


def test_a_step_of_more_sequences_much_faster_than_of_fewer_is_named_beyond_noise_only() -> None:
    steep = {1: 20.0, 2: 30.0, 3: 50.0, 4: 35.0}
    found = decode_findings(twin(list(steep.values()), per_seq=0.0), decode_rows(steep))
    assert codes(found) == ["decode-nonmonotonic"]
    assert re.search(r"4 sequences \(3[45]\.\d ms\) are 3[01]% faster than of 3 \(50\.\d ms\)", str(found[0]))
    # Measured clean (closed loops of three and of four), the dip is the engine's
    clean = decode_findings(twin(list(steep.values()), per_seq=0.0), decode_rows(steep), {3: 50.0, 4: 35.5})
    assert "decode-nonmonotonic" not in codes(clean)
    # The same dip in a handful of very noisy steps is not beyond noise
    noisy = decode_rows(steep, spread=0.35, count=10, seed=3)
    assert "decode-nonmonotonic" not in codes(decode_findings(twin(list(steep.values()), per_seq=0.0), noisy))


def test_steps_of_one_size_in_two_modes_are_named() -> None:
    """llama-server's KV cache per slot: two streams step in 31 ms as neighbours, 48 ms apart."""
    rows = decode_rows({1: 24.0, 2: 31.0}, spread=0.01)
    rows[40::2, 0] = 48.0  # half the two-stream steps on the slow path
    found = decode_findings(twin([24.0, 39.5], per_seq=0.0), rows)
    assert codes(found) == ["decode-spread"] and "2 sequences vary" in str(found[0])
    assert decode_findings(twin([24.0, 31.0], per_seq=0.0), decode_rows({1: 24.0, 2: 31.0})) == []


def prompt_rows(a: FittedAccelerator, times: float, decoders: int, prompts: int = 1, n: int = 12) -> np.ndarray:
    """Steps that each held `prompts` prompts of 128 tokens beside `decoders` streams, taking `times` the twin's
    price of them on top of its decode part."""
    k = 0.128 * prompts
    price = float(a.prompt_ms(np.array([k]), np.array([float(prompts)]), np.array([decoders]))[0])
    decode = a.decode_ms[decoders - 1] if decoders and a.decode_ms else 0.0
    return np.array([[decode + times * price, decoders + prompts, 0.2, k, float(prompts)] for _ in range(n)])


def test_the_twins_price_of_prompts_grows_with_company() -> None:
    a = FittedAccelerator("t", step_ms=0.0, weights_ms=0.0, per_ktoken_ms=2000.0, per_seq_ms=0.0,
                          per_context_ktoken_ms=0.0, kv_tokens=1, decode_ms=[10.0], prompt_step_ms=40.0,
                          prompt_beside=0.1, prompt_together=0.02)
    one = 40.0 + 2000.0 * 0.128
    got = a.prompt_ms(np.array([0.128, 0.128, 1.024]), np.array([1.0, 1.0, 8.0]), np.array([0, 6, 0]))
    assert np.allclose(got, [one, one * 1.6, (40.0 + 2048.0) * 1.14])


def test_what_prompt_steps_took_is_read_against_the_twins_price() -> None:
    a = twin([10.0, 20.0, 30.0, 40.0], per_seq=10.0)
    assert abs((prompt_ratio(a, prompt_rows(a, 1.0, 3)) or 0) - 1.0) < 1e-9
    assert abs((prompt_ratio(a, prompt_rows(a, 1.5, 0, prompts=4)) or 0) - 1.5) < 1e-9
    assert prompt_ratio(a, prompt_rows(a, 1.0, 0, n=4)) is None  # too few steps to say


def test_prompts_that_cost_more_than_priced_under_one_load_are_named() -> None:
    a = twin([10.0, 20.0, 30.0, 40.0], per_seq=10.0)
    found = prompt_findings(a, {"prompt-128": prompt_rows(a, 1.0, 0), "poisson-fit": prompt_rows(a, 1.6, 3)})
    assert codes(found) == ["prompt-cost-by-load"]
    assert "1.00× the twin's price in prompt-128 and 1.60× in poisson-fit" in str(found[0])
    assert prompt_findings(a, {"a": prompt_rows(a, 1.0, 0), "b": prompt_rows(a, 1.2, 3)}) == []
