"""What a run reports while it goes: progress of a stage, and the plan before the pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Progress:
    """A progress report of a stage: ``"count"`` (building the vocabulary) or ``"distill"``.

    Attributes:
        stage: ``"count"`` or ``"distill"``.
        bytes_done: Input bytes done. Counting: bytes read. Distilling: bytes whose sentences
            went through the encoder; inside a chunk, its share of the chunk's bytes in
            proportion to the chunk's tokens encoded (never bytes only read ahead).
        total_bytes: Size of the input (0 for texts in memory, whose size is unknown).
        sentences: Sentences done by this run, counted as ``bytes_done`` is.
        tokens: Model tokens encoded by this run.
        start_bytes: Where this run started: a resumed run's checkpoint position, else 0. The
            rates of a run are ``(bytes_done - start_bytes)``, ``sentences`` and ``tokens`` over
            its time.

    """

    stage: str
    bytes_done: int
    total_bytes: int
    sentences: int = 0
    tokens: int = 0
    start_bytes: int = 0

    @property
    def bytes_read(self) -> int:
        """The former name of ``bytes_done``."""
        return self.bytes_done


@dataclass
class FinetuneProgress:
    """One report of a running fine-tuning: steps done of ``total_steps``, last loss, tokens."""

    step: int
    total_steps: int
    loss: float | None
    tokens: int


@dataclass
class TuneProgress:
    """One report of a running ``tune``: the epoch and step, the step's loss, the best held-out.

    Attributes:
        epoch: The epoch under way, from 1.
        max_epochs: The most epochs (training may stop earlier, see ``patience``).
        step: Steps done in this epoch.
        steps_per_epoch: Steps in each epoch.
        loss: This step's training loss.
        best: The best held-out loss so far (the start's before any epoch ends).

    """

    epoch: int
    max_epochs: int
    step: int
    steps_per_epoch: int
    loss: float
    best: float


@dataclass(frozen=True)
class Work:
    """Input that encoder work stands for: corpus bytes and sentences."""

    bytes: int = 0
    sentences: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.bytes + other.bytes, self.sentences + other.sentences)

    def __sub__(self, other: Work) -> Work:
        return Work(self.bytes - other.bytes, self.sentences - other.sentences)

    def split(self, weights: Sequence[int] | np.ndarray) -> np.ndarray:
        """Split into parts proportional to ``weights``, in whole numbers that add up to this.

        A chunk's bytes and sentences, shared over its inputs by their tokens. Returns an
        ``(parts, 2)`` array: each part's bytes and sentences (an array, since a chunk has
        thousands of parts, and the encoder side adds a batch's parts at a time).

        Example:
            >>> Work(10, 3).split([1, 1, 1])[:, 0].tolist()
            [3, 3, 4]

        """
        ends = np.cumsum(np.asarray(weights, dtype=np.int64))
        if not len(ends):
            return np.zeros((0, 2), dtype=np.int64)
        whole = int(ends[-1]) or 1
        marks = np.array([self.bytes, self.sentences], dtype=np.int64) * ends[:, None] // whole
        # The last part ends at the whole, even where the weights add up to 0.
        marks[-1] = (self.bytes, self.sentences)
        return np.diff(marks, axis=0, prepend=0)


@dataclass(frozen=True)
class PassStart:
    """Where a distilling pass started (a resumed one: at its checkpoint), for its reports.

    Attributes:
        total_bytes: Size of the input.
        done: Bytes and sentences done before the pass, by the runs it resumes.
        tokens: Tokens those runs encoded.

    """

    total_bytes: int
    done: Work
    tokens: int

    def progress(self, done: Work, tokens: int) -> Progress:
        """The report once the pass has ``done`` and ``tokens`` (counting the earlier runs)."""
        return Progress(
            "distill",
            done.bytes,
            self.total_bytes,
            done.sentences - self.done.sentences,
            tokens - self.tokens,
            self.done.bytes,
        )


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
