"""Write outputs under temporary names, then rename them into place: a crash leaves no half file.

An output folder replaces an existing one only when this package wrote that one: each kind of
output says how to recognise it (:data:`OwnEntries`), and anything else in the folder is refused,
``overwrite`` or not, so a user's files are never deleted. While a command writes a folder it
holds it (:func:`output_lock`), so a second run into the same folder is refused at once.
"""

from __future__ import annotations

import errno
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
    _check_path(target)
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


def _check_path(target: Path) -> None:
    """Refuse a target that is a file, lies under a file, or cannot be renamed away."""
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    in_the_way = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if in_the_way is not None:
        raise OutputError(f"{target}: cannot create output folder ({in_the_way} is a file)")
    _refuse_unmovable(target)


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
    created = missing_folders(target.parent)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        staging.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the output should not be
    except OSError as error:
        remove_if_empty(created)
        raise OutputError(f"{target}: cannot create output folder ({error.strerror})") from None
    try:
        yield staging
        _swap_in(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        remove_if_empty(created)
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


@contextmanager
def output_lock(target: str | os.PathLike) -> Iterator[None]:
    """Hold the output folder ``target`` while a command makes it: a second holder is refused.

    Take it before any long work: it also checks that the folder can be made there (making the
    missing parent folders, removed again on exit if they stay empty). The lock is ``flock`` on
    ``.NAME.lock`` beside ``target``, never inside it, where an overwrite would swap it away with
    the old folder. The kernel drops the lock when its process ends, however it ends, so a crashed
    run never blocks the next one; the file is removed on exit (a crash leaves it, hidden).

    Raises:
        OutputError: Another process holds ``target``, or no folder can be made or written there.

    """
    target = Path(target)
    _check_path(target)
    if target.is_dir() and not os.access(target, os.W_OK | os.X_OK):
        raise OutputError(f"{target}: cannot write here ({os.strerror(errno.EACCES)})")
    resolved = target.resolve()  # one lock per folder, whatever link or spelling names it
    lock = resolved.parent / f".{resolved.name}.lock"
    created = missing_folders(resolved.parent)
    try:
        handle = _take_lock(lock, target)
    except BaseException:
        remove_if_empty(created)
        raise
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # while still held, so that no one locks a removed file
        os.close(handle)
        remove_if_empty(created)


def _take_lock(lock: Path, target: Path) -> int:
    """Lock the file ``lock`` (made, with its folder, if missing); returns its descriptor."""
    import fcntl  # POSIX only, as the folder swaps are; imported here to keep loading portable

    while True:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise OutputError(f"{target}: cannot create output folder ({error.strerror})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(handle, 32).decode("ascii", "replace").strip()
            os.close(handle)
            process = f"process {holder}" if holder.isdigit() else "another process"
            raise OutputError(
                f"{target}: another roberta-static run is writing it ({process}); "
                "wait for it to end, or choose another output folder"
            ) from None
        except OSError as error:  # a file system without locks, say
            os.close(handle)
            raise OutputError(f"{target}: cannot lock it ({error.strerror})") from None
        # The previous holder removes the file as it ends: a lock on that removed file is no lock.
        if _same_file(lock, handle):
            os.ftruncate(handle, 0)
            os.write(handle, f"{os.getpid()}\n".encode("ascii"))
            return handle
        os.close(handle)


def _same_file(path: Path, handle: int) -> bool:
    """Whether ``path`` still names the file open as ``handle``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(handle)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def check_not_source(out: Path, source: Path) -> None:
    """Refuse to write the output into the folder it is read from, or one holding it.

    By any name or link: writing replaces ``out`` whole, and with it what is read.
    """
    if out.resolve() == source.resolve():
        named = "" if out == source else f" ({source})"
        raise OutputError(
            f"{out}: is the folder being read{named}, which writing would replace; "
            "choose another output folder"
        )
    if out.resolve() in source.resolve().parents:
        raise OutputError(
            f"{out}: holds {source}, which is being read and which writing would replace; "
            "choose another output folder"
        )


def write_failed(target: Path, error: OSError) -> OutputError:
    """The one-line error for a failed write (a full disk, say) that left ``target`` as it was.

    Call it once the write is undone: a ``target`` still there held something before, and kept
    it; one that is gone was new, and nothing of it is left. The error keeps the ``errno`` of
    ``error``, so a caller can tell a full disk (``ENOSPC``) apart.
    """
    reason = error.strerror or str(error) or type(error).__name__
    left = "its previous contents are unchanged" if target.exists() else "nothing was left behind"
    failed = OutputError(f"{target}: writing failed ({reason}); {left}")
    failed.errno = error.errno
    return failed


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


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, outermost first."""
    return [p for p in (*reversed(folder.parents), folder) if not p.exists()]


def remove_if_empty(folders: list[Path]) -> None:
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
