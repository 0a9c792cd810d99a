"""Which files corpus paths name: folders expanded, and what they hold that is not read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError, short_list
from ..outputs import written_by_roberta_static

OWN_OUTPUT = "a folder roberta-static wrote"
_READ_AGAIN = (
    "; corpus files are read more than once (checked, resumed, split among workers), "
    "so save the text to a file and name that"
)


@dataclass(frozen=True)
class CorpusFiles:
    """The files that corpus paths name, and what their folders hold that is not read.

    Attributes:
        files: Each file named, and each file in a folder named (recursively, sorted).
        sizes: Each file's size in bytes when listed (one ``stat`` per file: a corpus of many
            files is never measured again).
        skipped: Each entry of those folders left unread, with why: a folder roberta-static
            wrote (:data:`OWN_OUTPUT`: its outputs are never corpus), a pipe, socket or device,
            a broken symbolic link, a link to a folder (not followed), an unreadable folder.
            Hidden entries (``.name``) are left out without a word, as ``ls`` leaves them out.

    """

    files: list[Path]
    sizes: list[int]
    skipped: dict[Path, str] = field(default_factory=dict)


def find_corpus_files(paths: Iterable[str | os.PathLike]) -> CorpusFiles:
    """Expand corpus paths, files and folders, into the files to read.

    Corpus files are read more than once (checked, resumed, split into shards), so a pipe or a
    device is refused: its text would be gone after the first reading.

    Raises:
        CorpusError: A path is missing, not a file or folder, or an output of roberta-static; a
            folder holds no file to read; no path is given.

    """
    files: list[tuple[Path, int]] = []
    skipped: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found, left = _corpus_folder(path)
            files.extend(found)
            skipped.update(left)
        elif (size := _file_size(path)) is not None:
            files.append((path, size))
        else:
            raise _not_a_corpus(path)
    if not files:
        raise CorpusError("no corpus path given")
    return CorpusFiles([path for path, _ in files], [size for _, size in files], skipped)


def _file_size(path: Path) -> int | None:
    """The size of a regular file (following links); None for anything else."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _corpus_folder(folder: Path) -> tuple[list[tuple[Path, int]], dict[Path, str]]:
    """The files a folder named as corpus holds, and what it leaves unread.

    Raises:
        CorpusError: The folder is an output of roberta-static, or holds no file to read.

    """
    if written_by_roberta_static(folder):
        raise CorpusError(f"{folder}: is {OWN_OUTPUT}, not a corpus; name its text files")
    found, left = _folder_files(folder)
    if not found:
        held = [f"{p} ({why})" for p, why in left.items()]
        unread = f" to read (not read: {short_list(held, 3)})" if held else ""
        raise CorpusError(f"{folder}: folder holds no files{unread}")
    return found, left


def _not_a_corpus(path: Path) -> CorpusError:
    """The error for a corpus path that is neither a file nor a folder."""
    if path.is_symlink() and not path.exists():
        return CorpusError(f"{path}: is {_not_read(path)}")
    if path.exists():
        return CorpusError(f"{path}: is {_not_read(path)}, not a file{_READ_AGAIN}")
    if str(path) == "-":
        return CorpusError(f"-: standard input cannot be a corpus{_READ_AGAIN}")
    return CorpusError(f"{path}: no such file or folder")


def _folder_files(folder: Path) -> tuple[list[tuple[Path, int]], dict[Path, str]]:
    """The files under ``folder`` with their sizes, sorted, and the entries not read, with why."""
    found: list[tuple[Path, int]] = []
    skipped: dict[Path, str] = {}

    def unreadable(error: OSError) -> None:
        skipped[Path(error.filename)] = f"an unreadable folder ({error.strerror})"

    for root, folders, names in os.walk(folder, onerror=unreadable):
        here = Path(root)
        kept = []
        for path in _visible(here, folders):
            why = _not_walked(path)
            if why is None:
                kept.append(path.name)
            else:
                skipped[path] = why
        folders[:] = kept  # os.walk goes into these only
        for path in _visible(here, names):
            if (size := _file_size(path)) is not None:
                found.append((path, size))
            else:
                skipped[path] = _not_read(path)
    return sorted(found), dict(sorted(skipped.items()))


def _visible(folder: Path, names: list[str]) -> list[Path]:
    """The entries of ``folder`` among ``names`` that are not hidden (``.name``)."""
    return [folder / name for name in names if not name.startswith(".")]


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
