"""What a run reports while it goes: progress of a stage, and the plan before the pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Progress:
    """A progress report: ``stage`` is ``"count"`` (building the vocabulary) or ``"distill"``."""

    stage: str
    bytes_read: int
    total_bytes: int
    sentences: int = 0
    tokens: int = 0


@dataclass
class Plan:
    """Reported once before the pass: the accumulator's size and where it lives."""

    entries: int
    dim: int
    accumulator_bytes: int
    device: str
    free_bytes: int | None

    def __str__(self) -> str:
        free = f" ({size_text(self.free_bytes)} free)" if self.free_bytes is not None else ""
        return (
            f"{self.entries:,} entries x {self.dim:,} floats = "
            f"{size_text(self.accumulator_bytes)} on {self.device}{free}"
        )


ProgressCallback = Callable[[Progress | Plan], None]


def size_text(n_bytes: int) -> str:
    """``512 B``, ``3.2 kB``, ``41.0 MB``, ``2.5 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes} B"
