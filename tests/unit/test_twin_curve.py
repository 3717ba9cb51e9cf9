"""The decode table of a fitted twin (issue 34): a step priced by how many sequences it decodes as measured,
not as a line — llama.cpp on a CPU steps in 24 ms with one stream, 31 with two, 52 with three, 51 with four —
fitted from step gaps, with the prompts' cost taken from the server's own timing where it gives one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.devices.catalogue import catalogue, load_presets
from harness.devices.fitted import FittedAccelerator, FittedModel
from harness.devices.step import StepLoad
from harness.errors import PresetError
from harness.records import RequestRecord
from harness.twin.curve import fit_curve
from harness.twin.samples import Streams, server_batches

MS = 1_000_000
TABLE = [24.0, 31.0, 52.0, 51.0, 70.0, 62.0]
TWIN = FittedAccelerator("curve-twin", step_ms=0.0, weights_ms=0.0, per_ktoken_ms=2000.0, per_seq_ms=10.0,
                         per_context_ktoken_ms=0.0, kv_tokens=1_000_000, prompt_step_ms=30.0, decode_ms=TABLE)


def step(decodes: int, prompt_tokens: int = 0) -> float:
    load = StepLoad(tokens=decodes + prompt_tokens, seqs=decodes + (prompt_tokens > 0), decodes=decodes)
    return FittedModel(TWIN).step_seconds(load) * 1e3


def test_a_step_costs_the_table_entry_of_its_decodes_and_its_prompts_on_top() -> None:
    assert step(1) == pytest.approx(24.0)
    assert step(3) == pytest.approx(52.0) and step(4) == pytest.approx(51.0)  # not a line: four cost less than three
    assert step(8) == pytest.approx(62.0 + 2 * 10.0)  # past the table: per_seq_ms a sequence more
    assert step(0, 137) == pytest.approx(30.0 + 2.0 * 137)  # a prompt alone: its step's setup and its tokens
    assert step(2, 137) == pytest.approx(31.0 + 30.0 + 2.0 * 137)  # inside two streams' decode step


def _samples(rng: np.random.Generator, mislabeled: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Gap rows [ms, sequences, context/1000, prompt tokens/1000, prompts] of the engine above, 1% noise; and the
    server's own rows of its prompt steps. `mislabeled`: a share of decode gaps the fit is told held a prompt."""
    decoders = rng.integers(1, 7, 4000)
    prompts = np.where(rng.random(4000) < 0.1, rng.integers(1, 3, 4000), 0)
    prompt_k = prompts * 0.137
    gap = np.array([step(int(d), round(float(p) * 1000)) for d, p in zip(decoders, prompt_k, strict=True)])
    gap *= np.exp(0.01 * rng.standard_normal(4000))
    wrong = (prompts == 0) & (rng.random(4000) < mislabeled)
    prompts = np.where(wrong, 1, prompts)
    rows = np.column_stack([gap, decoders + prompts, decoders * 0.2, prompts * 0.137, prompts])
    server_decoders = rng.integers(0, 5, 60)
    server_prompts = rng.integers(1, 5, 60)
    server = np.column_stack([[step(int(d), int(p) * 137) for d, p in zip(server_decoders, server_prompts,
                                                                          strict=True)],
                              server_decoders + server_prompts, server_decoders * 0.2, server_prompts * 0.137,
                              server_prompts])
    return rows, server


def test_the_curve_fit_recovers_the_table_and_the_prompt_terms() -> None:
    rows, _ = _samples(np.random.default_rng(3))
    curve = fit_curve(rows)
    assert curve is not None
    assert curve.decode_ms == pytest.approx(TABLE, rel=0.02)
    assert curve.per_ktoken_ms == pytest.approx(2000.0, rel=0.05)
    assert curve.prompt_step_ms == pytest.approx(30.0, abs=8.0)


def test_the_servers_own_prompt_timing_outweighs_gaps_given_a_prompt_they_did_not_hold() -> None:
    """A late first token can hand its prompt to the wrong gap (in a llama-server run, more of them than held
    one); the server's own timing cannot."""
    rows, server = _samples(np.random.default_rng(4), mislabeled=0.3)
    told = fit_curve(rows, server)
    assert told is not None and told.per_ktoken_ms == pytest.approx(2000.0, rel=0.05)
    assert told.prompt_step_ms == pytest.approx(30.0, abs=8.0)
    guessed = fit_curve(rows)  # the mislabeled gaps alone drag the prompt terms off
    assert guessed is not None and abs(guessed.per_ktoken_ms / 2000.0 - 1) > 0.10


def test_too_few_batch_sizes_give_no_table() -> None:
    rows = np.column_stack([np.full(50, 24.0), np.ones(50), np.full(50, 0.2), np.zeros(50), np.zeros(50)])
    assert fit_curve(rows) is None  # one batch size: nothing a line would not do


def timed(index: int, sent_ms: float, first_ms: float, prompt_ms: float, prompt: int = 137) -> RequestRecord:
    chunks = [first_ms + 25.0 * k for k in range(6)]
    return RequestRecord(f"r{index}", "p", index, prompt, 6, int(sent_ms * MS), sent_ns=int(sent_ms * MS),
                         first_token_ns=int(chunks[0] * MS), last_token_ns=int(chunks[-1] * MS),
                         chunk_ns=[int(c * MS) for c in chunks], prompt_tokens=prompt, server_prompt_ms=prompt_ms)


def test_prompts_the_server_timed_together_are_one_batch_and_overlapped_ones_are_left_out() -> None:
    records = [timed(0, 0, 300, 290),  # alone
               timed(1, 1000, 1600, 590), timed(2, 1001, 1601, 589),  # one batch of two
               timed(3, 3000, 3400, 390), timed(4, 3200, 3600, 300)]  # overlapping, not together
    rows = server_batches(records, Streams.of(records), first_token_step=0)
    assert [r[0] for r in rows] == [290.0, 589.5]
    assert [r[4] for r in rows] == [1.0, 2.0] and rows[1][3] == pytest.approx(0.274)
    # The step after the prompt's (llama.cpp) moves every window back one of the request's own steps: the same.
    assert [r[4] for r in server_batches(records, Streams.of(records), first_token_step=1)] == [1.0, 2.0]


def test_a_preset_names_a_decode_table_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("accelerators:\n  t: {kind: fitted, step_ms: 0, weights_ms: 0, per_ktoken_ms: 1, per_seq_ms: 1, "
                    "per_context_ktoken_ms: 0, kv_tokens: 9, decode_ms: [24, -1]}\n")
    with pytest.raises(PresetError, match="decode_ms"):
        load_presets(path)
    path.write_text(path.read_text().replace("[24, -1]", "[24, 31.5]"))
    # An ASIC's decode_ms stays one number (its own field of the same name).
    (tmp_path / "asic.yaml").write_text("accelerators:\n  a: {kind: asic, decode_ms: 0.3, decode_ms_per_b_params: "
                                        "0.03, growth_per_seq: 0.001, prefill_tokens_per_s_8b: 40000, memory_gb: 44}\n")
    load_presets(path)
    assert catalogue().devices["t"].decode_ms == [24, 31.5]  # type: ignore[attr-defined]
    load_presets(tmp_path / "asic.yaml")
    assert catalogue().devices["a"].decode_ms == 0.3  # type: ignore[attr-defined]


def test_the_table_departs_from_a_line_only_where_the_engine_does() -> None:
    rows, _ = _samples(np.random.default_rng(5))
    curve = fit_curve(rows)
    assert curve is not None and sorted(curve.seen) == [1, 2, 3, 4, 5, 6]
    # The best line through 24 … 62 ms misses three sequences (52 ms) by a fifth: the table is needed.
    slope, intercept = np.polyfit(np.arange(1, 7), TABLE, 1)
    assert curve.departure(lambda n, ctx: intercept + slope * n) > 0.10
    # An engine that is a line (20 ms + 5 ms a sequence) gives a table that departs from it by noise only.
    decoders = rows[:, 1] - rows[:, 4]
    line = np.column_stack([20.0 + 5.0 * decoders, decoders, rows[:, 2], np.zeros((len(rows), 2))])
    flat = fit_curve(line)
    assert flat is not None and flat.departure(lambda n, ctx: 20.0 + 5.0 * n) < 0.02


def test_prompts_of_one_size_are_priced_per_token() -> None:
    """Every prompt step held one 137-token prompt: a step's own cost cannot be told from its tokens', so all of
    it goes per token — eight such prompts together then cost eight times one (as llama-server's do: 323 ms
    for one, 2,561 for eight), not one step's setup and a little more."""
    rng = np.random.default_rng(6)
    decoders = rng.integers(1, 5, 2000)
    one = rng.random(2000) < 0.1
    gap = np.array([step(int(d), 137 if p else 0) for d, p in zip(decoders, one, strict=True)])
    rows = np.column_stack([gap, decoders + one, decoders * 0.2, one * 0.137, one.astype(float)])
    curve = fit_curve(rows)
    assert curve is not None and curve.prompt_step_ms == 0.0
    assert curve.per_ktoken_ms * 0.137 == pytest.approx(30.0 + 2.0 * 137, rel=0.02)  # one prompt's step, as measured


def test_the_lines_decode_step_is_the_simulators() -> None:
    """`sim fit` weighs the table against the line's decode step as the engine would price it."""
    line = FittedAccelerator("line", step_ms=2.0, weights_ms=6.0, per_ktoken_ms=60.0, per_seq_ms=0.5,
                             per_context_ktoken_ms=0.11, kv_tokens=1_000_000)
    for n, context in ((1, 300), (8, 4000), (64, 90_000)):
        load = StepLoad(tokens=n, seqs=n, decodes=n, decode_context=context)
        assert line.line_decode_ms(n, context) == pytest.approx(FittedModel(line).step_seconds(load) * 1e3)


def test_a_late_wake_up_among_a_lengths_few_lone_prompts_does_not_move_their_price() -> None:
    """`sim twin` times three lone prompts of each length; on a busy machine one of them may end late (a client
    woken a few ms after its first token): each length's median prices them, not a least-squares mean."""
    decode = np.column_stack([np.full(40, 24.0), np.ones(40), np.full(40, 0.1), np.zeros(40), np.zeros(40)])
    lengths = np.repeat([0.128, 0.512, 1.024], 3)
    gaps = 30.0 + 60.0 * lengths + np.tile([-2.0, 0.0, 2.0], 3)  # a few ms of jitter …
    gaps[8] += 7.0  # … and one reply late at the longest length, within five deviations: not dropped as a stall
    lone = np.column_stack([gaps, np.ones(9), np.zeros(9), lengths, np.ones(9)])
    # Two more lone prompts of the shortest length and one together (MIN_ALONE: prompts priced alone)
    extra = np.array([[30.0 + 60 * 0.128, 1, 0, 0.128, 1]] * 2 + [[30.0 + 60 * 0.256, 2, 0, 0.256, 2]])
    curve = fit_curve(np.vstack([decode, np.column_stack([np.full(40, 31.0), np.full(40, 2.0), np.full(40, 0.2),
                                                          np.zeros(40), np.zeros(40)]), lone, extra]))
    assert curve is not None
    assert curve.per_ktoken_ms == pytest.approx(60.0, rel=0.01)  # least squares over the rows: +4.2%
    assert curve.prompt_step_ms == pytest.approx(30.0, rel=0.02)


def test_a_prompt_whose_cost_per_token_grows_with_its_length_is_priced_by_its_attention() -> None:
    """llama-server on 2 cores: 128 tokens alone in 262 ms (2.0 s per 1k), 504 in 1,339 (2.7 s per 1k); eight of
    128 together, each attending only to itself, cost nearer the short price than the long one."""
    def engine(k: float, n: int = 1) -> float:  # 20 ms a step, 1.8 s per 1k, 3 s per (1k)² of attention
        return 20.0 + 1800.0 * k + 3000.0 * n * (k / n) ** 2 / 2

    decode = [np.column_stack([np.full(30, t), np.full(30, n), np.full(30, 0.1), np.zeros(30), np.zeros(30)])
              for n, t in ((1, 15.0), (2, 30.0))]
    lengths = np.repeat([0.032, 0.128, 0.504], 4)
    lone = np.column_stack([[engine(k) for k in lengths], np.ones(12), np.zeros(12), lengths, np.ones(12)])
    together = np.array([[engine(8 * 0.256, 8), 8, 0, 8 * 0.256, 8]] * 4)
    curve = fit_curve(np.vstack([*decode, lone, together]))
    assert curve is not None
    assert curve.prompt_attn_ms == pytest.approx(3000.0, rel=0.02) and curve.per_ktoken_ms == pytest.approx(
        1800.0, rel=0.02)
    assert abs(curve.prompt_together) < 0.01  # prompts together explained by their own attention, no growth
    eight = curve.prompt_part(np.array([8 * 0.128]), np.array([8.0]), np.zeros(1))
    assert float(eight[0]) == pytest.approx(engine(8 * 0.128, 8), rel=0.02)
    # The simulator prices a step of them alike, from the attention its engine counts
    twin = FittedAccelerator("attn", step_ms=0.0, weights_ms=0.0, per_ktoken_ms=curve.per_ktoken_ms, per_seq_ms=0.0,
                             per_context_ktoken_ms=0.0, kv_tokens=10_000, prompt_step_ms=curve.prompt_step_ms,
                             prompt_attn_ms=curve.prompt_attn_ms, decode_ms=curve.decode_ms)
    load = StepLoad(tokens=1024, seqs=8, decodes=0, prefill_attn=8 * 128 * 64)
    assert FittedModel(twin).step_seconds(load) * 1e3 == pytest.approx(engine(8 * 0.128, 8), rel=0.02)


@pytest.mark.parametrize("shared", [True, False])
def test_a_prompt_beside_decoding_streams_pays_the_steps_own_cost_once_where_the_engine_does(shared: bool) -> None:
    """vLLM runs a step as one forward pass: on a CPU a 128-token prompt alone took 198 ms (a step's own 45), beside
    decoding streams their step plus ~150; a twin that charged the 45 twice missed a light Poisson load's TTFT by
    +19%. An engine that pays a prompt's setup on top (llama.cpp's ubatches) keeps it: the fit tells them apart."""
    table = [45.0, 50.0, 55.0, 60.0]

    def engine(decoders: int, k: float) -> float:
        own = 0.0 if shared and decoders else 45.0
        return (table[decoders - 1] if decoders else 0.0) + own + 1150.0 * k

    rng = np.random.default_rng(5)
    decode = [np.column_stack([np.full(30, t), np.full(30, n), np.full(30, 0.1), np.zeros(30), np.zeros(30)])
              for n, t in enumerate(table, 1)]
    lengths = np.repeat([0.128, 0.512, 1.016], 3)
    lone = np.column_stack([[engine(0, k) for k in lengths], np.ones(9), np.zeros(9), lengths, np.ones(9)])
    beside_n = rng.integers(1, 5, 40)
    beside = np.column_stack([[engine(int(n), 0.128) * rng.lognormal(0, 0.02) for n in beside_n], beside_n + 1,
                              np.full(40, 0.1), np.full(40, 0.128), np.ones(40)])
    curve = fit_curve(np.vstack([*decode, lone, beside]))
    assert curve is not None
    assert curve.prompt_step_shared is shared
    assert curve.prompt_step_ms == pytest.approx(45.0, rel=0.05)
    assert abs(curve.prompt_beside) < 0.03  # no growth left to explain
    # The simulator prices a prompt beside three streams as the engine did.
    twin = FittedAccelerator("shared", step_ms=0.0, weights_ms=0.0, per_ktoken_ms=curve.per_ktoken_ms,
                             per_seq_ms=curve.per_seq_ms, per_context_ktoken_ms=0.0, kv_tokens=10_000,
                             prompt_step_ms=curve.prompt_step_ms, prompt_beside=curve.prompt_beside,
                             prompt_step_shared=curve.prompt_step_shared, decode_ms=curve.decode_ms)
    load = StepLoad(tokens=3 + 128, seqs=4, decodes=3, prefill_attn=0)
    assert FittedModel(twin).step_seconds(load) * 1e3 == pytest.approx(engine(3, 0.128), rel=0.03)
