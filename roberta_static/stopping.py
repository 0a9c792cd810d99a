"""How a long run is asked to stop: from a signal handler, another thread, or a test.

A stop request is an event; where stopping at once loses nothing, the request also raises
:class:`StopNow` in the main thread, so loading, counting or a computation does not hold it up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class StopNow(KeyboardInterrupt):
    """Raised by :meth:`Checkpointing.request_stop` where stopping at once loses nothing."""


@dataclass
class Checkpointing:
    """When and where a run writes checkpoints.

    Args:
        folder: The output folder; checkpoints go to ``folder/.checkpoint``.
        every_seconds: Time between checkpoints (0: only when stopped).
        stop: Set it (from another thread, say) to checkpoint after the batch in hand and raise
            :class:`~roberta_static.errors.Interrupted`; a signal handler calls
            :meth:`request_stop` instead.

    Attributes:
        written: Whether this run has written a checkpoint.
        nothing_to_lose: Whether stopping this instant loses no work a checkpoint would keep:
            until the pass has taken its first summed batch. The pass keeps it up to date.

    """

    folder: Path
    every_seconds: float = 600.0
    stop: Any = field(default_factory=threading.Event)
    written: bool = False
    nothing_to_lose: bool = True

    def request_stop(self) -> None:
        """Ask the run to stop; call it from the main thread's signal handler.

        Sets ``stop``; where nothing would be lost, also raises :class:`StopNow` there and then,
        so model loading, counting or a batch in the encoder does not hold the stop up. The pass
        turns a :class:`StopNow` into a checkpoint when it has work to keep.
        """
        self.stop.set()
        if self.nothing_to_lose:
            self.nothing_to_lose = False  # a second request waits for the first to finish
            raise StopNow

    @contextmanager
    def uninterrupted(self) -> Iterator[None]:
        """While work must not be cut short (a Ray cluster starting): a stop waits for its end.

        A stop that would have ended the run at once still does, as soon as the work is done.
        """
        could_stop_now, self.nothing_to_lose = self.nothing_to_lose, False
        try:
            yield
        finally:
            self.nothing_to_lose = could_stop_now
        if could_stop_now and self.stop.is_set():
            raise StopNow


class StopRequest(threading.Event):
    """The ``stop`` of :func:`~roberta_static.finetune.run.finetune` that a signal handler may call.

    ``set()`` (from any thread) saves a checkpoint after the current step. A signal handler calls
    :meth:`request_stop` instead (as ``distill``'s ``Checkpointing`` has it): before training
    begins, while the model loads and the first perplexity is measured, stopping loses nothing,
    so it raises :class:`StopNow` there and then.
    """

    def __init__(self) -> None:
        super().__init__()
        self.nothing_to_lose = True

    def request_stop(self) -> None:
        """Ask the run to stop; call it from the main thread's signal handler."""
        self.set()
        if self.nothing_to_lose:
            self.nothing_to_lose = False  # a second request waits for the first to finish
            raise StopNow
