"""Worker setups for tests that hold workers in their start-up: the first worker to build its
producer starts and the others never do, or every worker starts once a file exists."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from roberta_static.engine.producer import Producer, ProducerSetup


@dataclass(frozen=True)
class StuckSetup(ProducerSetup):
    """A setup whose first worker starts at once; the others stay in their start-up."""

    claimed: str = ""  # a file the first worker creates

    def producer(self) -> Producer:
        """The producer, in the worker that claims the file first; the others wait an hour."""
        try:
            os.close(os.open(self.claimed, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            time.sleep(3600)
        return super().producer()


@dataclass(frozen=True)
class GatedSetup(ProducerSetup):
    """A setup whose workers start once the file ``gate`` exists."""

    gate: str = ""

    def producer(self) -> Producer:
        """The producer, once ``gate`` exists (a worker forked from a warm server is quick)."""
        while not os.path.exists(self.gate):
            time.sleep(0.01)
        return super().producer()
