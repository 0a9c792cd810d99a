"""Stream text units (lines, or one JSONL field per line) from corpus files, never a whole file."""

from __future__ import annotations

import bz2
import codecs
import errno
import functools
import gzip
import hashlib
import itertools
import json
import lzma
import os
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import CorpusError, short_list
from .compressed import is_whole
from .files import FileList, find_corpus_files

_SAMPLE_BYTES = 65_536  # the part of a file read ahead of a resume (identity)

_DECOMPRESSORS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw),
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
}
_COMPRESSION_NAMES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
# Units are cut near this size: spaCy refuses texts over nlp.max_length, and memory stays bounded.
MAX_UNIT_BYTES = 100_000
MAX_UNIT_CHARS = 100_000


def decode(data: bytes) -> tuple[str, int]:
    """Decode UTF-8, replacing each invalid byte run with U+FFFD; returns the text and bad bytes."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    parts: list[str] = []
    bad = 0
    position = 0
    while True:
        try:
            parts.append(data[position:].decode("utf-8"))
            return "".join(parts), bad
        except UnicodeDecodeError as error:
            parts.append(data[position : position + error.start].decode("utf-8"))
            parts.append("\ufffd")
            bad += error.end - error.start
            position += error.end


def normalize_text(text: str) -> str:
    """The one Unicode form (NFC) of corpus text and vocabulary entries alike.

    ``café`` typed as ``e`` + combining accent (NFD, as macOS file names and some exports write
    it) then matches ``café`` typed as one character.

    Example:
        >>> normalize_text("cafe\u0301") == "caf\u00e9"
        True

    """
    return unicodedata.normalize("NFC", text)


def is_compressed(path: Path) -> bool:
    """Whether a corpus file is read through a decompressor (``.gz``, ``.bz2``, ``.xz``)."""
    return path.suffix in _DECOMPRESSORS


_FIRST_BLOCK = 8192  # what the check before a run reads of a file: binary, blank or text


def check_readable(files: Sequence[Path]) -> None:
    """Check corpus files before a run: damaged or cut-short files, or no text, fail at once.

    A compressed file's first block and end are read. A plain file's first block is read until
    one file holding text is found; after it, a plain file is only checked to be there and
    readable, as opening each of a folder's many small files would delay the run (a binary one
    among them is skipped and listed by the run).

    Raises:
        CorpusError: A file is missing or unreadable; a ``.gz``/``.bz2``/``.xz`` file is not one,
            or is cut short (see :mod:`.compressed`); or no file holds text: each is empty, or
            binary (NUL bytes in its first block: a run skips it). A file of blank lines counts
            as empty when its first block is the whole file.

    """
    found: dict[Path, str] = {}
    text = False
    for path in files:
        if text and not is_compressed(path):
            _check_openable(path)
            continue
        found[path] = _first_block(path)
        text = text or found[path] == "text"
    if not files or text:
        return
    binary = [str(path) for path, kind in found.items() if kind == "binary"]
    if len(files) == 1 and binary:
        raise CorpusError(
            f"{files[0]}: skipped as binary (it holds NUL bytes), so the corpus holds no text"
        )
    if binary:
        empty = [str(path) for path, kind in found.items() if kind == "empty"]
        listed = f"; empty: {short_list(empty, 3)}" if empty else ""
        raise CorpusError(
            f"{corpus_name(files)}: no text to read (skipped as binary, holding NUL bytes: "
            f"{short_list(binary, 3)}{listed})"
        )
    if len(files) == 1:
        raise CorpusError(f"{files[0]}: corpus holds no text")
    names = short_list([str(path) for path in files], 3)
    raise CorpusError(f"{names}: corpus holds no text (every file is empty or blank)")


def _check_openable(path: Path) -> None:
    """Raise :class:`CorpusError` if ``path`` is gone or this process may not read it."""
    with read_errors(path):
        path.stat()
        if not os.access(path, os.R_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))


def _first_block(path: Path) -> str:
    """``"text"``, ``"empty"`` or ``"binary"``: what a run would find at the start of ``path``.

    Raises:
        CorpusError: See :func:`check_readable`.

    """
    with read_errors(path):
        stat = path.stat()
    return _checked_first_block(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _checked_first_block(path: Path, size: int, mtime_ns: int) -> str:
    """:func:`_first_block`, once per file content (``size`` and ``mtime_ns`` key the cache)."""
    with read_errors(path), path.open("rb") as raw, Corpus._open(path, raw) as stream:
        block = stream.read(_FIRST_BLOCK)
        binary = _binary(block)
        # A file of blank lines holds no text either: one that fits in a block is found here,
        # before the model loads, rather than by the run.
        empty = not block.strip() and not stream.read(1)
    if is_compressed(path) and not is_whole(path):
        kind = _COMPRESSION_NAMES[path.suffix]
        raise CorpusError(f"{path}: truncated {kind} file (ended before its end marker)")
    return "binary" if binary else "empty" if empty else "text"


def corpus_name(files: Sequence[Path]) -> str:
    """How messages name a corpus: its file, or how many files it has."""
    return str(files[0]) if len(files) == 1 else f"{len(files)} corpus files"


def is_jsonl(path: Path) -> bool:
    """Whether a file holds JSON lines (``.jsonl`` or ``.ndjson``, optionally compressed)."""
    suffixes = path.suffixes
    if suffixes and suffixes[-1] in _DECOMPRESSORS:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _JSONL_SUFFIXES


@dataclass(frozen=True)
class Position:
    """Where a text unit ends, precisely enough to resume after it.

    Attributes:
        file: Index into ``Corpus.files``.
        offset: Offset, in the (decompressed) stream, of the record the unit came from.
        line: Line number of that record, for messages.
        skip: Units of that record already yielded (a JSONL text cut in pieces).

    """

    file: int
    offset: int
    line: int
    skip: int


START = Position(file=0, offset=0, line=1, skip=0)


class Corpus:
    """The text units of one or more corpus paths, read lazily and re-iterable.

    A unit is one line of a text file (ended by LF, CRLF or a lone CR), or the ``text_field`` of
    one line of a JSONL file, in Unicode NFC, without the byte order mark a file may start with;
    units longer than ``MAX_UNIT_BYTES`` are cut at a space, so memory stays bounded whatever the
    line length. Files holding NUL bytes are binary: they are skipped and listed in
    ``binary_files``; what the folders hold that is not read is in ``skipped`` (see
    :class:`~roberta_static.text.files.CorpusFiles`). While iterating, ``bytes_read`` follows
    the position in the input, for progress bars.

    Example:
        >>> corpus = Corpus(["examples/wiki.txt"])  # doctest: +SKIP
        >>> next(iter(corpus))[:20]  # doctest: +SKIP

    """

    def __init__(
        self,
        paths: Iterable[str | os.PathLike],
        text_field: str = "text",
        sizes: Sequence[int] | None = None,
    ) -> None:
        """Read ``paths``; ``sizes``: those of the files they are (already listed), in order."""
        if sizes is None:
            listing = find_corpus_files(paths)
            self.files, sizes, self.skipped = listing.files, listing.sizes, listing.skipped
        else:
            self.files = paths if isinstance(paths, FileList) else FileList(paths)
            self.skipped = {}
        self.text_field = text_field
        # Where each file starts in the corpus's bytes (and where the last one ends), from one
        # listing: progress, shards and positions never measure the files again.
        self.starts = array("q", itertools.accumulate(sizes, initial=0))
        self.total_bytes = self.starts[-1]
        self.bytes_read = 0
        self.bad_bytes = 0
        self.lines_cut = 0
        self.binary_files: list[Path] = []

    def __iter__(self) -> Iterator[str]:
        return (text for text, _ in self.units())

    def __str__(self) -> str:
        return corpus_name(self.files)

    @property
    def sizes(self) -> array[int]:
        """Each file's size in bytes, as listed."""
        return array("q", (end - start for start, end in itertools.pairwise(self.starts)))

    def describe(self) -> list[dict[str, Any]]:
        """Path and size of each file, for ``meta.json``."""
        return [
            {"path": str(f), "bytes": size} for f, size in zip(self.files, self.sizes, strict=True)
        ]

    def offset_of(self, position: Position) -> int:
        """Corpus bytes before ``position`` (inside a compressed file: before the file)."""
        done = self.starts[min(position.file, len(self.files))]
        if position.file < len(self.files) and not is_compressed(self.files[position.file]):
            done += position.offset
        return done

    def units(
        self, start: Position = START, stop: Position | None = None
    ) -> Iterator[tuple[str, Position]]:
        """Yield each unit with the position to resume after it, from ``start`` up to ``stop``.

        ``stop`` (exclusive) is the start of a record, as a shard plan cuts a file
        (:mod:`roberta_static.text.shards`).
        """
        self.bytes_read = self.starts[start.file]
        self.bad_bytes = self.lines_cut = 0
        self.binary_files = []
        last = len(self.files) if stop is None else min(stop.file + 1, len(self.files))
        for index in range(start.file, last):
            path = self.files[index]
            resume = start if index == start.file else START
            end = stop.offset if stop is not None and index == stop.file else None
            if end == 0:
                break
            with read_errors(path), open(path, "rb") as raw:
                stream = self._open(path, raw)
                if _looks_binary(stream, resume.offset):
                    if resume.offset == 0:  # a file's later shards are not listed again
                        self.binary_files.append(path)
                else:
                    done = self.bytes_read
                    for text, position in self._file_units(path, stream, resume, end):
                        self.bytes_read = done + raw.tell()
                        yield text, Position(index, position.offset, position.line, position.skip)
            self.bytes_read = self.starts[index + 1]

    def _file_units(
        self, path: Path, stream: IO[bytes], start: Position, end: int | None = None
    ) -> Iterator[tuple[str, Position]]:
        # A line longer than MAX_UNIT_BYTES comes as several records: it counts once cut, at its
        # last record (one that starts a read may continue such a line).
        in_cut_line = start.offset > 0 and _byte_before(stream, start.offset) != b"\n"
        stream.seek(start.offset)
        jsonl = is_jsonl(path)
        line = start.line
        for offset, record, ends_line in _records(stream, start.offset, whole_lines=jsonl):
            if end is not None and offset >= end:
                return
            read_before = offset == start.offset and start.skip > 0  # counted before the resume
            self.lines_cut += ends_line and in_cut_line and not read_before
            in_cut_line = not ends_line
            if offset == 0:
                record = record.removeprefix(codecs.BOM_UTF8)
            text, bad = decode(record.rstrip(b"\r\n"))
            self.bad_bytes += bad
            if jsonl:
                text = self._field(path, line, text)
            # Normalised once, before segmentation: every character offset after this refers to
            # the same text, the one the subword tokenizer reads.
            text = normalize_text(text)
            # A lone CR ends a line too (old Mac files, mixed-newline exports).
            pieces = list(split_long(text)) if jsonl else text.split("\r")
            first = start.skip if offset == start.offset else 0
            self.lines_cut += jsonl and first == 0 and len(pieces) > 1
            for number in range(first, len(pieces)):
                if pieces[number].strip():
                    yield pieces[number], Position(0, offset, line, number + 1)
            line += record.endswith(b"\n")

    @staticmethod
    def _open(path: Path, raw: IO[bytes]) -> IO[bytes]:
        decompressor = _DECOMPRESSORS.get(path.suffix)
        return decompressor(raw) if decompressor else raw

    def _field(self, path: Path, number: int, line: str) -> str:
        if not line.strip():
            return ""
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            # Some of json's messages end in "at" ("Unterminated string starting at").
            column = (
                f"column {error.colno}" if error.msg.endswith(" at") else f"at column {error.colno}"
            )
            raise CorpusError(f"{path}:{number}: not valid JSON ({error.msg} {column})") from None
        text = record.get(self.text_field) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise CorpusError(f"{path}:{number}: no string field {self.text_field!r}")
        return text


class TextCorpus:
    """Texts held in memory, streamed in order: each string is one unit (long ones are cut).

    ``texts`` is any iterable of strings and is never read ahead: a list, a pandas ``Series``, or a
    generator over a dataframe column. A string is always text here, never a path. A generator can
    be read only once, so it cannot also build the vocabulary (pass one, or a re-iterable). Runs
    over texts cannot be checkpointed or resumed: that needs files to return to.

    Example:
        >>> list(TextCorpus(["The cat sat.", "  ", "A dog ran."]))
        ['The cat sat.', 'A dog ran.']

    """

    def __init__(self, texts: Iterable[str]) -> None:
        if isinstance(texts, (str, bytes)):
            raise CorpusError("texts: expected an iterable of strings, got a single string")
        self.texts = texts
        self.reiterable = iter(texts) is not texts  # a generator or file is its own iterator
        self.files: list[Path] = []
        self.skipped: dict[Path, str] = {}
        self.total_bytes = 0  # unknown until read
        self.bytes_read = 0
        self.bad_bytes = 0
        self.lines_cut = 0
        self.binary_files: list[Path] = []
        self._started = False

    def __iter__(self) -> Iterator[str]:
        return (text for text, _ in self.units())

    def __str__(self) -> str:
        return "texts"

    def describe(self) -> list[dict[str, Any]]:
        """The texts' UTF-8 size, for ``meta.json``."""
        return [{"path": "<texts in memory>", "bytes": self.bytes_read}]

    def units(
        self, start: Position = START, stop: Position | None = None
    ) -> Iterator[tuple[str, Position]]:
        """Yield each unit with its position (``offset`` is the index of its string).

        ``start`` and ``stop`` are part of the corpus interface; texts are always read whole.
        """
        if self._started and not self.reiterable:
            raise CorpusError(
                "texts: a generator can be read only once; pass a list or another re-iterable"
            )
        self._started = True
        self.bytes_read = self.lines_cut = 0
        for index, text in enumerate(self.texts):
            if not isinstance(text, str):
                raise CorpusError(f"texts: item {index} is {type(text).__name__}, expected str")
            self.bytes_read += len(text.encode("utf-8"))
            pieces = list(split_long(normalize_text(text)))
            self.lines_cut += len(pieces) > 1
            for number, piece in enumerate(pieces, start=1):
                if piece.strip():
                    yield piece, Position(0, index, index + 1, number)


@contextmanager
def read_errors(path: Path) -> Iterator[None]:
    """Turn a damaged, truncated or unreadable file into one :class:`CorpusError` naming it.

    The decompressors report damage in several ways (``EOFError``, ``gzip.BadGzipFile``,
    ``zlib.error``, ``lzma.LZMAError``, ``OSError``); the user needs the file and the problem.
    """
    kind = _COMPRESSION_NAMES.get(path.suffix)
    try:
        yield
    except CorpusError:
        raise
    except EOFError:
        raise CorpusError(f"{path}: truncated {kind} file (ended before its end marker)") from None
    except (OSError, lzma.LZMAError, zlib.error) as error:
        detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
        if kind is None or (isinstance(error, OSError) and error.errno is not None):
            raise CorpusError(f"{path}: cannot read ({detail})") from None
        raise CorpusError(f"{path}: not valid {kind} data ({detail})") from None


def _looks_binary(stream: IO[bytes], offset: int) -> bool:
    """Whether the stream's first block is :func:`_binary`, the stream left at ``offset``."""
    stream.seek(0)
    binary = _binary(stream.read(_FIRST_BLOCK))
    stream.seek(offset)
    return binary


def _binary(first_block: bytes) -> bool:
    """Whether a file's first block holds a NUL byte (text files never do)."""
    return b"\0" in first_block


def _byte_before(stream: IO[bytes], offset: int) -> bytes:
    """The byte just before ``offset`` (the stream is left there)."""
    stream.seek(offset - 1)
    return stream.read(1)


def _records(
    stream: IO[bytes], offset: int, whole_lines: bool
) -> Iterator[tuple[int, bytes, bool]]:
    """Lines with the offset where each starts; without ``whole_lines`` long ones are cut.

    Yields ``(offset, record, ends_line)``: ``ends_line`` is False for a piece of a cut line
    that more of the line follows.
    """
    buffer = b""
    while True:
        # A cut leaves less than half a unit in the buffer, so there is always room to read.
        chunk = stream.readline(-1 if whole_lines else MAX_UNIT_BYTES - len(buffer))
        buffer += chunk
        if not chunk or buffer.endswith(b"\n") or len(buffer) >= MAX_UNIT_BYTES:
            if not buffer:
                return
            whole = not chunk or buffer.endswith(b"\n")
            cut = len(buffer) if whole else _cut_point(buffer)
            yield offset, buffer[:cut], whole
            offset += cut
            buffer = buffer[cut:]


def _cut_point(data: bytes) -> int:
    """Where to cut a long line: after its last space in the second half, else at a character."""
    space = max(data.rfind(b" ", len(data) // 2), data.rfind(b"\t", len(data) // 2))
    if space >= 0:
        return space + 1
    cut = len(data)
    while cut > len(data) - 4 and cut > 0 and data[cut - 1] & 0xC0 == 0x80:
        cut -= 1
    if cut > 0 and data[cut - 1] >= 0xC0:  # a lead byte whose continuation was cut off
        cut -= 1
    return cut if cut > 0 else len(data)


def split_long(text: str, limit: int = MAX_UNIT_CHARS) -> Iterator[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters, at a space where there is one."""
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        cut = cut + 1 if cut > 0 else limit
        yield text[:cut]
        text = text[cut:]
    yield text


@dataclass(frozen=True)
class CorpusIdentity:
    """What a resume needs unchanged: the files read so far, by absolute path and content.

    A file before the position is known by its size and a SHA-256 of its first and last 64 kB;
    the file being read (the last, when ``reading``) by the bytes before the position and their
    digest, so a bad line after it can be fixed; a compressed one being read by its whole
    identity. Later files may change. Held as arrays rather than a record per file: a folder of
    many documents is checkpointed again and again.

    Attributes:
        paths: Each file's absolute path.
        sizes: Each file's size in bytes (the file being read: the bytes before the position).
        digests: Each file's digest, 32 bytes each.
        reading: Whether the last file is being read (a plain file, known up to the position).

    """

    paths: FileList
    sizes: array[int]
    digests: bytes
    reading: bool = False

    @classmethod
    def of(
        cls,
        files: Sequence[Path],
        position: Position,
        absolute: FileList | None = None,
        known: CorpusIdentity | None = None,
    ) -> CorpusIdentity:
        """The identity of ``files`` up to ``position``.

        ``absolute``: the files' absolute paths, if already resolved. ``known``: an identity of
        the same files taken earlier in the run; the whole files it knows are not read again.
        """
        count = min(position.file + 1, len(files))
        reading = position.file < len(files) and not is_compressed(files[position.file])
        reused = 0 if known is None else min(len(known.sizes) - known.reading, count - reading)
        sizes = array("q", known.sizes[:reused] if known is not None else ())
        digests = bytearray(known.digests[: reused * _DIGEST_BYTES] if known is not None else b"")
        for index in range(reused, count):
            path = files[index]
            with read_errors(path):
                end = position.offset if reading and index == count - 1 else path.stat().st_size
                digests += _sampled_digest(path, end)
            sizes.append(end)
        if absolute is None:
            absolute = FileList(files[:count]).resolved()
        return cls(absolute[:count], sizes, bytes(digests), reading)

    def differences(self, before: CorpusIdentity) -> list[str]:
        """How the files differ from ``before``, taken at the same position: a phrase per kind.

        A file renamed with its content unchanged is no difference.
        """
        count = min(len(self.sizes), len(before.sizes))
        changed = [
            index
            for index in range(count)
            if self.sizes[index] != before.sizes[index]
            or self._digest(index) != before._digest(index)
        ]
        moved = {index for index in changed if self.paths[index] != before.paths[index]}
        found = []
        if moved:
            first = min(moved)
            found.append(
                f"the corpus files differ ({self.paths[first]} is not {before.paths[first]})"
            )
        edited = [str(self.paths[index]) for index in changed if index not in moved]
        if edited:
            found.append(
                f"{short_list(edited, 3)} changed since the checkpoint (in the part already read)"
            )
        return found

    def records(self) -> list[dict[str, Any]]:
        """The identity as JSON records, one per file."""
        records = []
        for index, path in enumerate(self.paths):
            partial = self.reading and index == len(self.paths) - 1
            size, digest = ("bytes_read", "read_sha256") if partial else ("bytes", "sha256")
            records.append(
                {"path": str(path), size: self.sizes[index], digest: self._digest(index).hex()}
            )
        return records

    def _digest(self, index: int) -> bytes:
        return self.digests[index * _DIGEST_BYTES : (index + 1) * _DIGEST_BYTES]


_DIGEST_BYTES = 32


def _sampled_digest(path: Path, end: int) -> bytes:
    """SHA-256 of the first and last 64 kB of ``path[:end]``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(min(_SAMPLE_BYTES, end)))
        tail = max(_SAMPLE_BYTES, end - _SAMPLE_BYTES)
        handle.seek(tail)
        digest.update(handle.read(max(0, end - tail)))
    return digest.digest()
