"""Steps that ended later than real time allows (the machine could not keep the simulated accelerator's pace):
the token times stay truthful — each is stamped when written — but the server was slower than modelled. Said
once as it happens when the server runs on its own, and summed up in one line when it stops; a harness run's
bundled simulator says only the sum, so a busy machine's first run is not a stream of warnings."""

from __future__ import annotations

from harness.clock import NS_PER_MS

BOUND_NS = 2 * NS_PER_MS  # later than this is worth a word; below it is the loop's own jitter


class LateSteps:
    def __init__(self, live: bool) -> None:
        self.live = live
        self.count = 0
        self.worst_ns = 0

    def observe(self, late_ns: int) -> str | None:
        """A step `late_ns` late; the line to say now, if any (the first, when live)."""
        if late_ns <= BOUND_NS:
            return None
        self.count += 1
        self.worst_ns = max(self.worst_ns, late_ns)
        if self.live and self.count == 1:
            return (f"sim: falling behind real time: a step ended {late_ns / NS_PER_MS:.1f} ms late (token times "
                    "stay truthful; the simulated accelerator is slower than modelled); the rest are summed up at "
                    "the end")
        return None

    def summary(self) -> str | None:
        """The one line for the end, or None when no step was late."""
        if not self.count:
            return None
        return (f"sim: fell behind real time in {self.count:,} step{'s' * (self.count > 1)} (worst "
                f"{self.worst_ns / NS_PER_MS:.1f} ms late; token times stay truthful: the machine was busier than "
                "the simulated accelerator is fast)")
