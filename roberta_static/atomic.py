"""Write outputs under temporary names, then rename them into place: a crash leaves no half file.

An output folder replaces an existing one only when this package wrote that one: each kind of
output says how to recognise it (:data:`OwnEntries`), and anything else in the folder is refused,
``overwrite`` or not, so a user's files are never deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path

from .errors import OutputError, short_list

OwnEntries = Callable[[Path], tuple[str, ...] | None]
"""Recognises one kind of output: given a folder, the ``fnmatch`` patterns of the entries that
kind writes there, or None when the folder lacks the kind's mark (so this package did not write
it)."""

_STAGING = ".staging.*"  # what atomic_files leaves if killed mid-write


def check_output_dir(target: Path, overwrite: bool, kinds: Sequence[OwnEntries] = ()) -> None:
    """Refuse a target that cannot be replaced, or whose contents are not ours to replace.

    A missing or empty folder is fine. A non-empty one is replaced only with ``overwrite``, and
    only when it holds the mark of one of ``kinds`` and nothing but entries those kinds write.
    """
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    _refuse_unmovable(target)
    if not target.is_dir() or not any(target.iterdir()):
        return
    foreign = foreign_entries(target, kinds)
    if foreign:
        raise OutputError(
            f"{target}: holds {short_list(foreign, 3)}, which roberta-static did not write; "
            "choose a new or empty output folder (--overwrite replaces only roberta-static's "
            "own outputs)"
        )
    if not overwrite:
        raise OutputError(f"{target}: folder is not empty; pass --overwrite to replace it")


def foreign_entries(folder: Path, kinds: Sequence[OwnEntries]) -> list[str]:
    """Entries of ``folder`` that none of ``kinds`` writes (all of them when none is marked).

    Folders are listed with a trailing ``/``.
    """
    patterns: list[str] = []
    for own in kinds:
        found = own(folder)
        if found is not None:
            patterns += [_STAGING, *found]
    return [
        entry.name + ("/" if entry.is_dir() else "")
        for entry in sorted(folder.iterdir())
        if not any(fnmatchcase(entry.name, pattern) for pattern in patterns)
    ]


def _refuse_unmovable(target: Path) -> None:
    """Refuse what cannot be renamed away: the working folder, a folder holding it, a mount."""
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise OutputError(
            f"{target}: is the current folder or holds it, and cannot be replaced; "
            "choose an output folder inside it"
        )
    if os.path.ismount(resolved):
        raise OutputError(
            f"{target}: is a mount point, and cannot be replaced; choose an output folder inside it"
        )
    if target.name in ("", ".."):
        raise OutputError(f"{target}: name the output folder itself, not a path ending in '..'")


@contextmanager
def atomic_directory(
    target: str | os.PathLike, overwrite: bool = False, kinds: Sequence[OwnEntries] = ()
) -> Iterator[Path]:
    """Yield a temporary folder beside ``target`` that replaces ``target`` when the block succeeds.

    ``overwrite`` and ``kinds`` decide whether an existing ``target`` may be replaced (see
    :func:`check_output_dir`). On failure the temporary folder, and any parent folder created
    for it, are removed and the previous ``target`` is untouched.
    """
    target = Path(target)
    check_output_dir(target, overwrite, kinds)
    created = [p for p in reversed(target.parents) if not p.exists()]
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        staging.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the output should not be
    except OSError as error:
        _remove_created(created)
        raise OutputError(f"{target}: cannot create output folder ({error.strerror})") from None
    try:
        yield staging
        _swap_in(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_created(created)
        if isinstance(error, OSError):
            raise write_failed(target, error) from None
        raise


@contextmanager
def atomic_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder``; on success its files and folders move in."""
    folder = Path(folder)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".staging.", dir=folder))
    except OSError as error:
        raise OutputError(f"{folder}: cannot write here ({error.strerror})") from None
    try:
        yield staging
        for item in sorted(staging.iterdir()):
            _swap_in(item, folder / item.name)
    except OSError as error:
        raise write_failed(folder, error) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_failed(target: Path, error: OSError) -> OutputError:
    """The one-line error for a failed write (a full disk, say) that left ``target`` as it was."""
    reason = error.strerror or str(error) or type(error).__name__
    return OutputError(f"{target}: writing failed ({reason}); its previous contents are unchanged")


def _swap_in(staging: Path, target: Path) -> None:
    if target.is_dir() and any(target.iterdir()):
        retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        try:
            os.replace(target, retired)
        except OSError:
            retired.rmdir()
            raise
        try:
            os.replace(staging, target)
        except OSError:
            os.replace(retired, target)
            raise
        shutil.rmtree(retired, ignore_errors=True)
    else:
        if target.is_dir():
            target.rmdir()
        os.replace(staging, target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_created(folders: list[Path]) -> None:
    """Remove the folders made for an output that failed, deepest first, if still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            pass


def follow_umask(*paths: Path) -> None:
    """Give files the mode ``open`` would: safetensors' ``save_file`` writes them private (0600)."""
    mode = 0o666 & ~_umask()
    for path in paths:
        path.chmod(mode)
