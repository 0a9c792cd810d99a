"""The encoder side's batcher on its own: milliseconds per chunk handed over.

Feeds 60 chunks of 2,048 random encoder inputs (lengths log-normal around 22 tokens, 4 to 200,
like sentences) through :class:`~roberta_static.engine.feeding.Batcher` with the CPU's default
budget and with CUDA's cap, as ``distill`` builds it, and prints the time per chunk (padding
the batches that go included), the batches made and the inputs left waiting. The batcher runs
in the encoder's process for every chunk, so its cost is taken from the pass's.

Usage: python benchmarks/batcher.py
"""

from __future__ import annotations

import random
import time

import numpy as np

from roberta_static.engine.feeding import HOLD_BATCHES, Batcher
from roberta_static.model.batches import EncoderInput


class Chunk:
    """A chunk of random inputs, as a producer hands over."""

    def __init__(self, inputs: int, rng: random.Random) -> None:
        lengths = [min(200, max(4, int(rng.lognormvariate(3.1, 0.5)))) for _ in range(inputs)]
        no_occurrence = np.zeros((0, 3), np.int64)
        self.inputs = [EncoderInput(np.zeros(n, np.int64), no_occurrence) for n in lengths]


def main() -> None:
    rng = random.Random(0)
    chunks = [Chunk(2048, rng) for _ in range(60)]
    tokens = sum(len(item.ids) for chunk in chunks for item in chunk.inputs) / len(chunks)
    for budget in (8192, 131072):
        batcher: Batcher[Chunk] = Batcher(budget, 0, HOLD_BATCHES * budget)
        start = time.perf_counter()
        batches = sum(len(batcher.add(chunk)) for chunk in chunks)
        seconds = (time.perf_counter() - start) / len(chunks)
        print(
            f"budget {budget:,}: {seconds * 1e3:.1f} ms per chunk of {tokens:,.0f} tokens, "
            f"{batches} batches, {len(batcher.pool):,} inputs waiting"
        )


if __name__ == "__main__":
    main()
