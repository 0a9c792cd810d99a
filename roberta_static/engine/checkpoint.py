"""Checkpoints of a distillation run: accumulator state, input position, vocabulary, config.

Written into ``OUT/.checkpoint/`` under a temporary name and renamed into place, so a crash while
writing keeps the previous checkpoint. Everything is numpy ``.npy``/``.npz`` (no pickle) and JSON.

A run may stop between two batches of a chunk: the chunk's sentences have all been read and
matched, so the checkpoint holds the position after the chunk and the batches not yet encoded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..atomic import missing_folders, remove_if_empty, write_failed
from ..config import DistillConfig
from ..errors import ConfigError
from ..text.corpus import Position, corpus_identity
from ..vectors.static import META_FILE

if TYPE_CHECKING:  # batching imports spaCy, which the CLI loads only once the options passed
    from ..model.batches import Batch

CHECKPOINT_DIR = ".checkpoint"
FORMAT = 2
_ARRAYS = ("sums", "counts", "remaining")


@dataclass
class Checkpoint:
    """Everything a run needs to continue exactly where it stopped.

    ``files`` are the corpus files' absolute paths, so a run resumes from any folder; ``corpus``
    identifies the part already read (see :func:`corpus_identity`); ``leftover`` holds the
    batches of the last chunk not yet encoded. A parallel pass (``workers > 1``) saves instead
    each shard's progress in ``shards`` and the occurrences each may still take per entry.
    """

    config: dict[str, Any]
    files: list[str]
    corpus: list[dict[str, Any]]
    entries: list[str]
    position: Position
    stats: dict[str, Any]
    encode_stats: dict[str, int]
    sums: np.ndarray
    counts: np.ndarray
    remaining: np.ndarray
    leftover: list[Batch] = field(default_factory=list)
    shards: list[dict[str, Any]] | None = None
    shard_quota: np.ndarray | None = None
    shard_remaining: np.ndarray | None = None


def save_checkpoint(folder: Path, checkpoint: Checkpoint) -> Path:
    """Write ``folder/.checkpoint`` atomically; returns its path.

    A failed write keeps the previous checkpoint, and leaves no folder it made for the first.
    """
    created = missing_folders(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{CHECKPOINT_DIR}.new.", dir=folder))
    except OSError as error:
        remove_if_empty(created)
        raise write_failed(folder / CHECKPOINT_DIR, error) from None
    try:
        for name in _ARRAYS:
            np.save(staging / f"{name}.npy", getattr(checkpoint, name), allow_pickle=False)
        np.savez(staging / "leftover.npz", **_batch_arrays(checkpoint.leftover))
        if checkpoint.shards is not None:
            np.savez_compressed(
                staging / "shards.npz",
                quota=checkpoint.shard_quota,
                remaining=checkpoint.shard_remaining,
            )
        state = {
            "format": FORMAT,
            **{
                key: value
                for key, value in asdict(checkpoint).items()
                if key not in (*_ARRAYS, "entries", "leftover", "shard_quota", "shard_remaining")
            },
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
        remove_if_empty(created)
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
            finished = (folder / META_FILE).is_file()
            raise ConfigError(
                f"{folder}: the run finished (its vectors are there); nothing to resume"
                if finished
                else f"{folder}: no checkpoint to resume from"
            )
        target = previous[-1]
    try:
        state = json.loads((target / "state.json").read_text(encoding="utf-8"))
        if state.pop("format", 1) != FORMAT:
            raise ConfigError(
                f"{target}: written by an older roberta-static, which this one cannot resume; "
                "start again with --overwrite"
            )
        entries = (target / "entries.txt").read_text(encoding="utf-8").split("\n")[:-1]
        arrays = {name: np.load(target / f"{name}.npy", allow_pickle=False) for name in _ARRAYS}
        with np.load(target / "leftover.npz", allow_pickle=False) as leftover:
            batches = _batches(leftover)
        if state.get("shards") is not None:
            with np.load(target / "shards.npz", allow_pickle=False) as shards:
                state["shard_quota"], state["shard_remaining"] = (
                    shards["quota"],
                    shards["remaining"],
                )
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"{target}: unreadable checkpoint ({error})") from None
    state["position"] = Position(**state["position"])
    return Checkpoint(entries=entries, **state, **arrays, leftover=batches)


def _batch_arrays(batches: list[Batch]) -> dict[str, np.ndarray]:
    return {
        f"{number}.{item.name}": getattr(batch, item.name)
        for number, batch in enumerate(batches)
        for item in fields(batch)
    }


def _batches(arrays: Any) -> list[Batch]:
    from ..model.batches import Batch

    names = [item.name for item in fields(Batch)]
    return [
        Batch(**{name: arrays[f"{number}.{name}"] for name in names})
        for number in range(len(arrays.files) // len(names))
    ]


def differences(checkpoint: Checkpoint, config: DistillConfig, files: list[Path]) -> list[str]:
    """Why ``config`` over ``files`` cannot continue ``checkpoint``, one phrase each.

    Only options that change the vectors count (runtime options may change), and only the part of
    the corpus read so far: a file may move, and a file may change after the checkpoint's position.
    """
    found = []
    saved = checkpoint.config
    for key, value in config.result_options().items():
        if saved.get(key) != value:
            found.append(f"{key} was {saved.get(key)!r}, now {value!r}")
    if len(files) < len(checkpoint.corpus):
        return [*found, "the corpus files differ"]
    now = corpus_identity(files, checkpoint.position)
    for new, old in zip(now, checkpoint.corpus, strict=True):
        if {**new, "path": ""} == {**old, "path": ""}:
            continue
        if new["path"] != old["path"]:
            found.append(f"the corpus files differ ({new['path']} is not {old['path']})")
        else:
            found.append(f"{new['path']} changed since the checkpoint (in the part already read)")
    return found
