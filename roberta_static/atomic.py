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
        raise OutputError(f"{target}: cannot create output folder ({error.strerror})") from None
    try:
        yield staging
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for parent in reversed(created):
            _remove_if_empty(parent)
        raise


@contextmanager
def atomic_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder``; on success its files move into ``folder``."""
    folder = Path(folder)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".staging.", dir=folder))
    except OSError as error:
        raise OutputError(f"{folder}: cannot write here ({error.strerror})") from None
    try:
        yield staging
        for item in sorted(staging.iterdir()):
            os.replace(item, folder / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
