"""Write outputs under temporary names, then rename them into place: a crash leaves no half file."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


def check_output_dir(target: Path, overwrite: bool) -> None:
    """Refuse a target that is a file, or a non-empty folder unless ``overwrite``."""
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise OutputError(f"{target}: folder is not empty; pass --overwrite to replace it")


@contextmanager
def atomic_directory(target: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside ``target`` that replaces ``target`` when the block succeeds.

    On failure the temporary folder, and any parent folder created for it, are removed and the
    previous ``target`` is untouched.
    """
    target = Path(target)
    check_output_dir(target, overwrite)
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
        os.replace(target, retired)
        os.replace(staging, target)
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
