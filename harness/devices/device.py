"""What every kind of device answers, so that nothing outside this package asks which kind a device is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from harness.devices.models import ModelSpec
from harness.devices.step import PerformanceModel, Serving

if TYPE_CHECKING:
    from harness.devices.fitted import FittedAccelerator


class Device(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def unit(self) -> str:
        """What one device is called in tables: GPU, a CS-3 system, an endpoint."""

    @property
    def splits_heads(self) -> bool:
        """Whether the model is split over devices by its attention heads (a count must divide them)."""

    @property
    def request_s(self) -> float:
        """Time each request spends outside the engine's steps (HTTP, parsing), where it was measured."""

    @property
    def kv_limit(self) -> int | None:
        """The most context the device is known to have started with; None: its memory model says."""

    @property
    def twin(self) -> FittedAccelerator | None:
        """The measured endpoint this device is (`harness sim twin`), or None."""

    @property
    def board_w(self) -> float | None:
        """One device's power at its rated limit (TDP), watts, from its datasheet; None: not known."""

    @property
    def bf16_flops(self) -> float | None:
        """Dense bf16 FLOP/s, for MFU; None: no roofline."""

    def device_counts(self) -> tuple[int, ...]:
        """How many devices a model may be split over."""

    def batch_defaults(self) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) its engine picks when not given."""

    def graph_largest(self, max_num_seqs: int) -> int:
        """The largest CUDA graph its engine captures for `max_num_seqs` (0: none, no padding)."""

    def link_text(self, tp: int) -> str: ...

    def allreduce(self, tp: int) -> str: ...

    def law(self, model: ModelSpec, serving: Serving) -> PerformanceModel:
        """Its step-time model for `model` served as `serving` says."""
