"""Which files corpus paths name: folders expanded, and what they hold that is not read."""

from __future__ import annotations

import functools
import itertools
import os
import stat
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from ..errors import CorpusError, short_list
from ..outputs import written_by_roberta_static

OWN_OUTPUT = "a folder roberta-static wrote"
_READ_AGAIN = (
    "; corpus files are read more than once (checked, resumed, split among workers), "
    "so save the text to a file and name that"
)


class FileList(Sequence[Path]):
    """File paths held as one string and the offsets where each ends.

    A ``Path`` object takes several hundred bytes and a list of them is pickled path by path; a
    corpus folder may hold millions of files, and every worker process holds the list. Here a
    file costs its name's characters and eight bytes, and items are made as they are read.

    Example:
        >>> files = FileList(["a.txt", "docs/b.txt"])
        >>> len(files), files[1]
        (2, PosixPath('docs/b.txt'))

    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = ()) -> None:
        names = [os.fspath(path) for path in paths]
        self._joined = "".join(names)
        self._ends = array("q", itertools.accumulate(map(len, names)))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> Path: ...

    @overload
    def __getitem__(self, index: slice) -> FileList: ...

    def __getitem__(self, index: int | slice) -> Path | FileList:
        if isinstance(index, slice):
            return FileList(self._names(range(len(self))[index]))
        number = range(len(self))[index]  # negative indices, and IndexError past the end
        return Path(self._name(number))

    def __iter__(self) -> Iterator[Path]:
        return map(Path, self._names(range(len(self))))

    def resolved(self) -> FileList:
        """The files' absolute paths, links resolved (as ``Path.resolve``).

        Each folder is resolved once, not once for each file in it.
        """
        folder = functools.lru_cache(maxsize=1024)(os.path.realpath)

        def resolve(name: str) -> str:
            head, tail = os.path.split(name)
            if tail in ("", ".", "..") or os.path.islink(name):
                return os.path.realpath(name)
            return os.path.join(folder(head or "."), tail)

        return FileList(map(resolve, self._names(range(len(self)))))

    def to_bytes(self) -> bytes:
        """The paths as bytes, each ended by a NUL (which no path holds); see :meth:`from_bytes`."""
        names = "".join(f"{name}\0" for name in self._names(range(len(self))))
        return names.encode("utf-8", "surrogateescape")

    @classmethod
    def from_bytes(cls, data: bytes) -> FileList:
        """The paths :meth:`to_bytes` wrote (names that are not UTF-8 come back the same)."""
        return cls(data.decode("utf-8", "surrogateescape").split("\0")[:-1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileList):
            return NotImplemented
        return (self._joined, self._ends) == (other._joined, other._ends)

    def __repr__(self) -> str:
        return f"FileList({len(self)} files)"

    def _names(self, numbers: range) -> Iterator[str]:
        return map(self._name, numbers)

    def _name(self, number: int) -> str:
        start = self._ends[number - 1] if number else 0
        return self._joined[start : self._ends[number]]


@dataclass(frozen=True)
class CorpusFiles:
    """The files that corpus paths name, and what their folders hold that is not read.

    Attributes:
        files: Each file named, and each file in a folder named (recursively, in path order).
        sizes: Each file's size in bytes when listed (one ``stat`` per file: a corpus of many
            files is never measured again).
        skipped: Each entry of those folders left unread, with why: a folder roberta-static
            wrote (:data:`OWN_OUTPUT`: its outputs are never corpus), a pipe, socket or device,
            a broken symbolic link, a link to a folder (not followed), an unreadable folder.
            Hidden entries (``.name``) are left out without a word, as ``ls`` leaves them out.

    """

    files: FileList
    sizes: array[int]
    skipped: dict[Path, str] = field(default_factory=dict)


def find_corpus_files(paths: Iterable[str | os.PathLike]) -> CorpusFiles:
    """Expand corpus paths, files and folders, into the files to read.

    Corpus files are read more than once (checked, resumed, split into shards), so a pipe or a
    device is refused: its text would be gone after the first reading.

    Raises:
        CorpusError: A path is missing, not a file or folder, or an output of roberta-static; a
            folder holds no file to read; no path is given.

    """
    names: list[str] = []
    sizes = array("q")
    skipped: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = len(names)
            for name, size in _corpus_folder(path, skipped):
                names.append(name)
                sizes.append(size)
            if len(names) == found:
                raise _empty_folder(path, skipped)
        elif (size := _file_size(path)) is not None:
            names.append(str(path))
            sizes.append(size)
        else:
            raise _not_a_corpus(path)
    if not names:
        raise CorpusError("no corpus path given")
    return CorpusFiles(FileList(names), sizes, dict(sorted(skipped.items())))


def _file_size(path: Path) -> int | None:
    """The size of a regular file (following links); None for anything else."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _corpus_folder(folder: Path, skipped: dict[Path, str]) -> Iterator[tuple[str, int]]:
    """The files a folder named as corpus holds, with their sizes.

    What the folder leaves unread is added to ``skipped``.

    Raises:
        CorpusError: The folder is an output of roberta-static.

    """
    if written_by_roberta_static(folder):
        raise CorpusError(f"{folder}: is {OWN_OUTPUT}, not a corpus; name its text files")
    return _folder_files(str(folder), skipped)


def _empty_folder(folder: Path, skipped: dict[Path, str]) -> CorpusError:
    """The error for a corpus folder that holds no file to read."""
    held = [
        f"{path} ({why})"
        for path, why in sorted(skipped.items())
        if path == folder or folder in path.parents
    ]
    unread = f" to read (not read: {short_list(held, 3)})" if held else ""
    return CorpusError(f"{folder}: folder holds no files{unread}")


def _not_a_corpus(path: Path) -> CorpusError:
    """The error for a corpus path that is neither a file nor a folder."""
    if path.is_symlink() and not path.exists():
        return CorpusError(f"{path}: is {_not_read(path)}")
    if path.exists():
        return CorpusError(f"{path}: is {_not_read(path)}, not a file{_READ_AGAIN}")
    if str(path) == "-":
        return CorpusError(f"-: standard input cannot be a corpus{_READ_AGAIN}")
    return CorpusError(f"{path}: no such file or folder")


def _folder_files(folder: str, skipped: dict[Path, str]) -> Iterator[tuple[str, int]]:
    """The files under ``folder`` with their sizes, as they are found, in path order.

    Each folder's entries are sorted by name and a subfolder is read where its name falls, so
    the files come in the order of their sorted paths without the whole list held to sort it.
    """
    try:
        with os.scandir(folder) as listing:
            entries = sorted(
                (entry for entry in listing if not entry.name.startswith(".")),
                key=lambda entry: entry.name,
            )
    except OSError as error:
        skipped[Path(folder)] = f"an unreadable folder ({error.strerror})"
        return
    for entry in entries:
        path = Path(entry.path)
        if _is_folder(entry):
            why = _not_walked(path)
            if why is None:
                yield from _folder_files(entry.path, skipped)
            else:
                skipped[path] = why
        elif (size := _file_size(path)) is not None:
            yield entry.path, size
        else:
            skipped[path] = _not_read(path)


def _is_folder(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder, or a link to one (as ``os.walk`` tells them apart)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _not_walked(folder: Path) -> str | None:
    """Why a folder inside a corpus folder is not read, if it is not."""
    if folder.is_symlink():
        return "a symbolic link to a folder, not followed"
    if written_by_roberta_static(folder):
        return OWN_OUTPUT
    return None


def _not_read(path: Path) -> str:
    """What a path that is neither a file nor a folder is, in a few words."""
    try:
        mode = path.stat().st_mode
    except OSError:  # a link to nothing (or to itself); else removed since it was listed
        return f"a broken symbolic link to {os.readlink(path)}" if path.is_symlink() else "gone"
    for test, what in (
        (stat.S_ISFIFO, "a pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "not a regular file"
