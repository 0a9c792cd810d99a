"""Stream text units (lines, or one JSONL field per line) from corpus files, never a whole file."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from .errors import CorpusError

_DECOMPRESSORS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw),
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
}
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}


def list_corpus_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand files and folders (recursively, sorted, hidden entries skipped) into corpus files."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise CorpusError(f"{path}: folder holds no files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise CorpusError(f"{path}: no such file or folder")
    if not files:
        raise CorpusError("no corpus path given")
    return files


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


def is_jsonl(path: Path) -> bool:
    """Whether a file holds JSON lines (``.jsonl`` or ``.ndjson``, optionally compressed)."""
    suffixes = path.suffixes
    if suffixes and suffixes[-1] in _DECOMPRESSORS:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _JSONL_SUFFIXES


class Corpus:
    """The text units of one or more corpus paths, read lazily and re-iterable.

    A unit is one line of a text file, or the ``text_field`` of one line of a JSONL file. While
    iterating, ``bytes_read`` follows the position in the (compressed) input, for progress bars.

    Example:
        >>> corpus = Corpus(["examples/wiki.txt"])  # doctest: +SKIP
        >>> next(iter(corpus))[:20]  # doctest: +SKIP

    """

    def __init__(self, paths: Iterable[str | os.PathLike], text_field: str = "text") -> None:
        self.files = list_corpus_files(paths)
        self.text_field = text_field
        self.total_bytes = sum(f.stat().st_size for f in self.files)
        self.bytes_read = 0
        self.bad_bytes = 0

    def __iter__(self) -> Iterator[str]:
        self.bytes_read = 0
        self.bad_bytes = 0
        done = 0
        for path in self.files:
            with open(path, "rb") as raw:
                stream = self._open(path, raw)
                jsonl = is_jsonl(path)
                for number, line in enumerate(stream, start=1):
                    text, bad = decode(line.rstrip(b"\r\n"))
                    self.bad_bytes += bad
                    self.bytes_read = done + raw.tell()
                    if jsonl:
                        text = self._field(path, number, text)
                    if text.strip():
                        yield text
            done += path.stat().st_size
            self.bytes_read = done

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
            raise CorpusError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        text = record.get(self.text_field) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise CorpusError(f"{path}:{number}: no string field {self.text_field!r}")
        return text
