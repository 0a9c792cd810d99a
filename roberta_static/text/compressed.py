"""Whether a compressed corpus file is whole, from its last bytes: no need to decompress it all.

A file cut short (a download or copy that stopped) fails only when a run reads its end. Each
format has an end that can be checked without the rest:

- ``.xz`` ends with a stream footer (magic ``YZ``, with a CRC) after an index with its own CRC;
- ``.bz2`` ends with a 48-bit end-of-stream marker and the stream's CRC, then under a byte of
  padding;
- ``.gz`` ends with the last deflate block and an 8-byte trailer; deflate blocks start at any bit
  and cannot be found from the end, so the last 128 kB are tried at each bit where a block's header
  can start (those whose code-length code is complete), each decoded with an unknown (zero)
  window before it, as rapidgzip finds blocks. A decoding that ends just before the trailer shows
  a whole file; two that agree and run out of input without an end show a cut-short one. When the
  tail settles neither (a small file; a file without such a block in its tail), the whole file is
  decompressed, which also checks its CRC.
"""

from __future__ import annotations

import functools
import os
import zlib
from pathlib import Path

import numpy as np

_TAIL_BYTES = 1 << 17  # the part of a .gz file searched for deflate blocks
_XZ_FOOTER = 12
_BZ2_END = 0x177245385090  # sqrt(pi), bzip2's end-of-stream marker
_GZIP_TRAILER = 8
_WINDOW = bytes(32768)  # deflate's window before a block found mid-stream: unknown, zeros
_AGREEING_BYTES = 64  # output two block starts must share to be the file's own stream
_READ = 1 << 20  # bytes read, and decompressed, at a time


def is_whole(path: Path) -> bool:
    """Whether the ``.gz``, ``.bz2`` or ``.xz`` file at ``path`` ends as a complete file does.

    Other suffixes are not checked (True). A file that is damaged elsewhere than at its end is
    found when a run reads it.

    Example:
        >>> import gzip, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "cut.txt.gz"
        >>> _ = path.write_bytes(gzip.compress(b"some text " * 1000)[:-20])
        >>> is_whole(path)
        False

    """
    checks = {".gz": _gzip_whole, ".bz2": _bz2_whole, ".xz": _xz_whole}
    check = checks.get(path.suffix)
    return check is None or check(path)


def _tail(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
        return handle.read()


def _xz_whole(path: Path) -> bool:
    """The last stream's footer and index, with their CRCs, after any stream padding."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        while end >= 4 and handle.seek(end - 4) >= 0 and handle.read(4) == bytes(4):
            end -= 4  # stream padding: groups of four zero bytes
        if end < 2 * _XZ_FOOTER:  # a stream header, and a footer of the same size
            return False
        handle.seek(end - _XZ_FOOTER)
        footer = handle.read(_XZ_FOOTER)
        if footer[-2:] != b"YZ" or zlib.crc32(footer[4:10]) != int.from_bytes(footer[:4], "little"):
            return False
        index_size = (int.from_bytes(footer[4:8], "little") + 1) * 4
        if index_size > end - 2 * _XZ_FOOTER:
            return False
        handle.seek(end - _XZ_FOOTER - index_size)
        index = handle.read(index_size)
    return index[0] == 0 and zlib.crc32(index[:-4]) == int.from_bytes(index[-4:], "little")


def _bz2_whole(path: Path) -> bool:
    """The end-of-stream marker and CRC, bit-aligned, in the last 11 bytes."""
    tail = int.from_bytes(_tail(path, 11), "big")
    return any((tail >> (padding + 32)) & (2**48 - 1) == _BZ2_END for padding in range(8))


def _gzip_whole(path: Path) -> bool:
    """The last member's deflate stream and trailer, from the tail; else the whole file."""
    if path.stat().st_size > 2 * _TAIL_BYTES:
        found = _deflate_tail(_tail(path, _TAIL_BYTES))
        if found is not None:
            return found
    return _gzip_decompresses(path)


def _gzip_decompresses(path: Path) -> bool:
    """Whether the whole file decompresses to the end of its last member (zero padding after)."""
    stream = None
    with open(path, "rb") as handle:
        while data := handle.read(_READ):
            while data:
                if stream is None or stream.eof:
                    data = data.lstrip(b"\0") if stream is not None else data
                    if not data:
                        break
                    stream = zlib.decompressobj(zlib.MAX_WBITS | 16)
                try:
                    stream.decompress(data, _READ)  # bounded: output is thrown away
                except zlib.error:
                    return False
                data = stream.unused_data if stream.eof else stream.unconsumed_tail
    return stream is None or stream.eof


def _deflate_tail(tail: bytes) -> bool | None:
    """Whether the gzip data ``tail`` ends a whole file: True, False, or None if it cannot say."""
    ran_out: list[np.ndarray] = []
    for start in _block_starts(tail).tolist():
        decoded = _inflate(tail, start)
        if decoded is None:
            continue
        output, end = decoded
        if end is not None:
            # The stream ended inside byte end - 1 or, when the block started inside a byte,
            # byte end: its bits then reach into the next byte of the tail.
            if start % 8 and _inflate(tail[:end], start, ending=True) is None:
                end += 1
            if _members_follow(tail[end:]):
                return True
        elif any(_agree(output, earlier) for earlier in ran_out):
            return False
        else:
            ran_out.append(output)
    return None


def _inflate(tail: bytes, start: int, ending: bool = False) -> tuple[np.ndarray, int | None] | None:
    """Deflate data from bit ``start`` of ``tail``, with an unknown (zero) window before it.

    Returns the output and the end of the stream in ``tail``'s bytes (None if the input ran out
    first); None if it is not deflate data, or (``ending``) does not end in ``tail``.
    """
    data = _shifted(tail, start % 8)[start // 8 :]
    stream = zlib.decompressobj(-zlib.MAX_WBITS, zdict=_WINDOW)
    try:
        output = np.frombuffer(stream.decompress(data), np.uint8)
    except zlib.error:
        return None
    if not stream.eof:
        return None if ending else (output, None)
    return output, start // 8 + len(data) - len(stream.unused_data)


@functools.lru_cache(maxsize=8)
def _shifted(tail: bytes, bit: int) -> bytes:
    """``tail`` moved by ``bit`` bits, so that zlib, which starts at a byte, starts at that bit."""
    return (int.from_bytes(tail, "little") >> bit).to_bytes(len(tail), "little")


def _block_starts(tail: bytes) -> np.ndarray:
    """Bits of ``tail`` where a dynamic-Huffman deflate block can start, in order.

    A header (RFC 1951, 3.2.7) whose code-length code is complete, as zlib requires: its 3-bit
    lengths (of the first HCLEN + 4 code-length symbols) add up to one by Kraft's sum.
    """
    bits = np.unpackbits(np.frombuffer(tail, np.uint8), bitorder="little").astype(np.int32)
    count = max(0, len(bits) - 17 - 3 * 19)

    def field(offset: int, width: int, at: np.ndarray | slice = slice(None)) -> np.ndarray:
        return sum(bits[offset + k :][:count][at] << k for k in range(width))  # type: ignore[return-value]

    starts = np.flatnonzero((field(1, 2) == 2) & (field(3, 5) <= 29) & (field(8, 5) <= 29))
    used = field(13, 4, starts) + 4
    kraft = np.zeros(len(starts), np.int32)
    for symbol in range(19):
        length = field(17 + 3 * symbol, 3, starts)
        kraft += np.where((symbol < used) & (length > 0), 128 >> length, 0)
    return starts[kraft == 128]


def _agree(later: np.ndarray, earlier: np.ndarray) -> bool:
    """Whether two decodings that ran to the end of the input are the same stream's.

    The later start's output is then the end of the earlier's, except for the bytes copied from
    before either start (zeros here).
    """
    if len(later) > len(earlier):
        later, earlier = earlier, later
    earlier = earlier[len(earlier) - len(later) :]
    known = (later != 0) & (earlier != 0)
    return int(known.sum()) >= _AGREEING_BYTES and bool((later[known] == earlier[known]).all())


def _members_follow(rest: bytes) -> bool:
    """Whether ``rest`` is a gzip trailer, then whole gzip members (or nothing)."""
    if len(rest) < _GZIP_TRAILER:
        return False
    rest = rest[_GZIP_TRAILER:]
    while rest.strip(b"\0"):
        stream = zlib.decompressobj(zlib.MAX_WBITS | 16)
        try:
            stream.decompress(rest)
        except zlib.error:
            return False
        if not stream.eof:
            return False
        rest = stream.unused_data
    return True
