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
        skipped: Each entry of those folders left unread, with why: a folder roberta-static
            wrote (:data:`OWN_OUTPUT`: its outputs are never corpus), a pipe, socket or device,
            a broken symbolic link, a link to a folder (not followed), an unreadable folder.
            Hidden entries (``.name``) are left out without a word, as ``ls`` leaves them out.

    """

    files: list[Path]
    skipped: dict[Path, str] = field(default_factory=dict)


def find_corpus_files(paths: Iterable[str | os.PathLike]) -> CorpusFiles:
    """Expand corpus paths, files and folders, into the files to read.

    Corpus files are read more than once (checked, resumed, split into shards), so a pipe or a
    device is refused: its text would be gone after the first reading.

    Raises:
        CorpusError: A path is missing, not a file or folder, or an output of roberta-static; a
            folder holds no file to read; no path is given.

    """
    files: list[Path] = []
    skipped: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if written_by_roberta_static(path):
                raise CorpusError(f"{path}: is {OWN_OUTPUT}, not a corpus; name its text files")
            found, left = _folder_files(path)
            if not found:
                held = [f"{p} ({why})" for p, why in left.items()]
                unread = f" to read (not read: {short_list(held, 3)})" if held else ""
                raise CorpusError(f"{path}: folder holds no files{unread}")
            files.extend(found)
            skipped.update(left)
        elif path.is_file():
            files.append(path)
        elif path.is_symlink() and not path.exists():
            raise CorpusError(f"{path}: is {_not_read(path)}")
        elif path.exists():
            raise CorpusError(f"{path}: is {_not_read(path)}, not a file{_READ_AGAIN}")
        elif str(path) == "-":
            raise CorpusError(f"-: standard input cannot be a corpus{_READ_AGAIN}")
        else:
            raise CorpusError(f"{path}: no such file or folder")
    if not files:
        raise CorpusError("no corpus path given")
    return CorpusFiles(files, skipped)


def _folder_files(folder: Path) -> tuple[list[Path], dict[Path, str]]:
    """The files under ``folder``, sorted, and the entries not read, with why."""
    found: list[Path] = []
    skipped: dict[Path, str] = {}

    def unreadable(error: OSError) -> None:
        skipped[Path(error.filename)] = f"an unreadable folder ({error.strerror})"

    for root, folders, names in os.walk(folder, onerror=unreadable):
        here = Path(root)
        kept = []
        for name in folders:
            path = here / name
            if name.startswith("."):
                continue
            if path.is_symlink():
                skipped[path] = "a symbolic link to a folder, not followed"
            elif written_by_roberta_static(path):
                skipped[path] = OWN_OUTPUT
            else:
                kept.append(name)
        folders[:] = kept
        for name in names:
            path = here / name
            if name.startswith("."):
                continue
            if path.is_file():
                found.append(path)
            else:
                skipped[path] = _not_read(path)
    return sorted(found), dict(sorted(skipped.items()))


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
