"""Cut a corpus into shards that worker processes read independently.

The plan depends on the files alone, never on the number of workers (a checkpoint keeps it, so a
run stopped with one worker count resumes exactly with another). A compressed file is one shard
(a decompressor cannot start mid-stream); a plain file larger than ``shard_bytes`` is cut at line
ends, and each piece knows the line number it starts at, so errors name the right line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .corpus import Position, is_compressed

SHARD_BYTES = 8_000_000  # the largest shard: what one worker holds up at the end of a run
MIN_SHARD_BYTES = 64_000
TARGET_SHARDS = 128  # enough to keep a 16-core machine's workers evenly busy
_READ_BYTES = 1 << 24


@dataclass(frozen=True)
class Shard:
    """The units from ``start`` (inclusive) to ``stop`` (exclusive) of a corpus."""

    start: Position
    stop: Position

    def byte_range(self, files: list[Path]) -> tuple[int, int]:
        """Where the shard starts and ends, counted in bytes over all the files in order."""
        sizes = [path.stat().st_size for path in files[: max(self.start.file, self.stop.file)]]
        start = sum(sizes[: self.start.file]) + self.start.offset
        return start, sum(sizes[: self.stop.file]) + self.stop.offset


def plan_shards(files: list[Path], shard_bytes: int | None = None) -> list[Shard]:
    """Shards of ``files`` in corpus order: whole files, and large plain files cut at line ends.

    ``shard_bytes`` defaults to a size that cuts the corpus into about ``TARGET_SHARDS`` shards,
    between ``MIN_SHARD_BYTES`` and ``SHARD_BYTES``.
    """
    if shard_bytes is None:
        total = sum(path.stat().st_size for path in files)
        shard_bytes = min(SHARD_BYTES, max(MIN_SHARD_BYTES, total // TARGET_SHARDS))
    shards = []
    for index, path in enumerate(files):
        starts = [(0, 1)] if is_compressed(path) else _line_cuts(path, shard_bytes)
        ends = [Position(index, offset, line, 0) for offset, line in starts[1:]]
        ends.append(Position(index + 1, 0, 1, 0))
        shards += [
            Shard(Position(index, offset, line, 0), stop)
            for (offset, line), stop in zip(starts, ends, strict=True)
        ]
    return shards


def _line_cuts(path: Path, shard_bytes: int) -> list[tuple[int, int]]:
    """``(offset, line)`` where each piece of a plain file starts.

    A piece ends at the first line end past a multiple of ``shard_bytes`` from its start.
    """
    cuts = [(0, 1)]
    offset, line, target = 0, 1, shard_bytes
    size = path.stat().st_size
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BYTES):
            start = 0
            while offset + len(block) > target:
                newline = block.find(b"\n", max(start, target - offset))
                if newline < 0:
                    break
                line += block.count(b"\n", start, newline + 1)
                start = newline + 1
                if offset + start < size:
                    cuts.append((offset + start, line))
                target = offset + start + shard_bytes
            line += block.count(b"\n", start)
            offset += len(block)
    return cuts
