"""Cut a corpus into shards that worker processes read independently.

The plan depends on the files alone, never on the number of workers (a checkpoint keeps it, so a
run stopped with one worker count resumes exactly with another). Consecutive files share a shard
until it holds about ``shard_bytes``, so a folder of many small documents makes a few shards, not
one per file; a compressed file is never cut (a decompressor cannot start mid-stream); a plain
file is cut at line ends, and each piece knows the line number it starts at, so errors name the
right line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .corpus import Position, is_compressed, read_errors

# The largest shard. A shard's counting and reading are held whole while it is read, in its worker
# and the main process, and one worker holds up the end of a run with it: larger shards took more
# memory and ran slower (CHANGELOG.md has the figures).
SHARD_BYTES = 1_000_000
MIN_SHARD_BYTES = 64_000
TARGET_SHARDS = 128  # enough to keep a 16-core machine's workers evenly busy
_READ_BYTES = 1 << 24


@dataclass(frozen=True)
class Shard:
    """The units from ``start`` (inclusive) to ``stop`` (exclusive) of a corpus."""

    start: Position
    stop: Position


def plan_shards(
    files: Sequence[Path], shard_bytes: int | None = None, *, sizes: Sequence[int] | None = None
) -> list[Shard]:
    """Shards of ``files`` in corpus order, each of about ``shard_bytes``.

    ``shard_bytes`` defaults to a size that cuts the corpus into about ``TARGET_SHARDS`` shards,
    between ``MIN_SHARD_BYTES`` and ``SHARD_BYTES``. ``sizes``: the files' sizes, if known.
    """
    if sizes is None:
        sizes = [path.stat().st_size for path in files]
    if shard_bytes is None:
        shard_bytes = min(SHARD_BYTES, max(MIN_SHARD_BYTES, sum(sizes) // TARGET_SHARDS))
    cuts = [Position(0, 0, 1, 0)]  # where each shard starts
    room = shard_bytes  # bytes the shard being planned may still take
    for index, (path, size) in enumerate(zip(files, sizes, strict=True)):
        cut = size > room and not is_compressed(path)
        pieces = _line_cuts(path, size, first=room, then=shard_bytes) if cut else []
        cuts += [Position(index, offset, line, 0) for offset, line in pieces]
        room = shard_bytes - (size - pieces[-1][0]) if pieces else room - size
        if room <= 0 and index + 1 < len(files):
            cuts.append(Position(index + 1, 0, 1, 0))
            room = shard_bytes
    stops = [*cuts[1:], Position(len(files), 0, 1, 0)]
    return [Shard(start, stop) for start, stop in zip(cuts, stops, strict=True)]


def _line_cuts(path: Path, size: int, first: int, then: int) -> list[tuple[int, int]]:
    """``(offset, line)`` of the line starts that cut a plain file into pieces.

    The first cut is at the first line end at or past ``first``, each later one at the first line
    end at least ``then`` bytes after the one before. No cut at the file's end.
    """
    cuts: list[tuple[int, int]] = []
    offset, line, target = 0, 1, max(first, 1)
    with read_errors(path), open(path, "rb") as handle:
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
                target = offset + start + then
            line += block.count(b"\n", start)
            offset += len(block)
    return cuts
