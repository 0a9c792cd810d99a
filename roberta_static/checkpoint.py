"""Checkpoints of a distillation run: accumulator state, input position, vocabulary, config.

Written into ``OUT/.checkpoint/`` under a temporary name and renamed into place, so a crash while
writing keeps the previous checkpoint. Everything is numpy ``.npy`` (no pickle) and JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import write_failed
from .config import DistillConfig
from .corpus import Position
from .errors import ConfigError

CHECKPOINT_DIR = ".checkpoint"
_ARRAYS = ("sums", "counts", "remaining")


@dataclass
class Checkpoint:
    """Everything a run needs to continue exactly where it stopped."""

    config: dict[str, Any]
    corpus: list[dict[str, Any]]
    entries: list[str]
    position: Position
    stats: dict[str, Any]
    encode_stats: dict[str, int]
    sums: np.ndarray
    counts: np.ndarray
    remaining: np.ndarray


def corpus_fingerprint(files: list[Path]) -> list[dict[str, Any]]:
    """Path, size and modification time of each corpus file."""
    return [
        {"path": str(f), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns} for f in files
    ]


def save_checkpoint(folder: Path, checkpoint: Checkpoint) -> Path:
    """Write ``folder/.checkpoint`` atomically; returns its path."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{CHECKPOINT_DIR}.new.", dir=folder))
    except OSError as error:
        raise write_failed(folder / CHECKPOINT_DIR, error) from None
    try:
        for name in _ARRAYS:
            np.save(staging / f"{name}.npy", getattr(checkpoint, name), allow_pickle=False)
        state = {
            key: value
            for key, value in asdict(checkpoint).items()
            if key not in _ARRAYS and key != "entries"
        }
        (staging / "entries.txt").write_text(
            "".join(f"{e}\n" for e in checkpoint.entries), encoding="utf-8"
        )
        (staging / "state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
        target = folder / CHECKPOINT_DIR
        if target.exists():
            retired = Path(tempfile.mkdtemp(prefix=f"{CHECKPOINT_DIR}.old.", dir=folder))
            os.replace(target, retired / CHECKPOINT_DIR)
            os.replace(staging, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            raise write_failed(folder / CHECKPOINT_DIR, error) from None
        raise
    return target


def checkpoint_entries(folder: Path) -> tuple[str, ...] | None:
    """A checkpoint's entries, when ``folder`` holds one of ours (see ``atomic.OwnEntries``)."""
    if not any(folder.glob(f"{CHECKPOINT_DIR}*/**/state.json")):
        return None
    return (CHECKPOINT_DIR, f"{CHECKPOINT_DIR}.*")


def load_checkpoint(folder: Path) -> Checkpoint:
    """Read ``folder/.checkpoint`` (or the previous one, if a crash hit the swap)."""
    target = folder / CHECKPOINT_DIR
    if not target.is_dir():
        previous = sorted(folder.glob(f"{CHECKPOINT_DIR}.old.*/{CHECKPOINT_DIR}"))
        if not previous:
            raise ConfigError(f"{folder}: no checkpoint to resume from")
        target = previous[-1]
    try:
        state = json.loads((target / "state.json").read_text(encoding="utf-8"))
        entries = (target / "entries.txt").read_text(encoding="utf-8").split("\n")[:-1]
        arrays = {name: np.load(target / f"{name}.npy", allow_pickle=False) for name in _ARRAYS}
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"{target}: unreadable checkpoint ({error})") from None
    state["position"] = Position(**state["position"])
    return Checkpoint(entries=entries, **state, **arrays)


def differences(checkpoint: Checkpoint, config: DistillConfig, files: list[Path]) -> list[str]:
    """What differs between a checkpoint and a new run's config and corpus, one phrase each."""
    found = []
    saved = checkpoint.config
    for key, value in config.to_dict().items():
        if saved.get(key) != value:
            found.append(f"{key} was {saved.get(key)!r}, now {value!r}")
    now = corpus_fingerprint(files)
    if [c["path"] for c in now] != [c["path"] for c in checkpoint.corpus]:
        found.append("the corpus files differ")
    else:
        found += [
            f"{c['path']} changed since the checkpoint"
            for c, old in zip(now, checkpoint.corpus, strict=True)
            if c != old
        ]
    return found


@dataclass
class Checkpointing:
    """When and where a run writes checkpoints.

    Args:
        folder: The output folder; checkpoints go to ``folder/.checkpoint``.
        every_seconds: Time between checkpoints (0: only when stopped).
        stop: Set it (from a signal handler, say) to checkpoint after the chunk in hand and raise
            :class:`~roberta_static.errors.Interrupted`.

    """

    folder: Path
    every_seconds: float = 600.0
    stop: Any = None
