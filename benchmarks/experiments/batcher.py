"""The encoder side's batcher on its own: milliseconds per chunk handed over, and how full.

Feeds 60 chunks of 2,048 random encoder inputs (lengths log-normal around 22 tokens, 4 to 200,
like sentences) through :class:`~roberta_static.engine.feeding.Batcher` with the CPU's default
budget and with CUDA's cap, as ``distill`` builds it, and prints the time per chunk (padding
the batches that go included), the batches made, their mean real tokens and the inputs left
waiting. The batcher runs in the encoder's process for every chunk, so its cost is taken from
the pass's. Then the same inputs in chunks of 512, as worker processes hand over a shard's
(smaller) chunks: their batches should be about as full.

Usage: python benchmarks/experiments/batcher.py
"""

from __future__ import annotations

import random
import time

import numpy as np

from roberta_static.engine.feeding import Batcher
from roberta_static.model.batches import EncoderInput


class Chunk:
    """A chunk of inputs of the given lengths, as a producer hands over."""

    def __init__(self, lengths: list[int]) -> None:
        no_occurrence = np.zeros((0, 3), np.int64)
        self.inputs = [EncoderInput(np.zeros(n, np.int64), no_occurrence) for n in lengths]


def main() -> None:
    rng = random.Random(0)
    lengths = [min(200, max(4, int(rng.lognormvariate(3.1, 0.5)))) for _ in range(60 * 2048)]
    for budget in (8192, 131072):
        for size in (2048, 512):
            chunks = [Chunk(lengths[i : i + size]) for i in range(0, len(lengths), size)]
            batcher: Batcher[Chunk] = Batcher.for_budget(budget, 0)
            start = time.perf_counter()
            sizes = [batch.real_tokens for chunk in chunks for batch, _ in batcher.add(chunk)]
            seconds = (time.perf_counter() - start) / len(chunks)
            print(
                f"budget {budget:,}, chunks of {size:,} inputs: {seconds * 1e3:.1f} ms per chunk "
                f"of {sum(lengths) / len(chunks):,.0f} tokens, {len(sizes)} batches x "
                f"{np.mean(sizes):,.0f} real tokens, {len(batcher.pool):,} inputs waiting"
            )


if __name__ == "__main__":
    main()
