"""A worker setup for tests: the first worker to build its producer starts, the others never do."""

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
