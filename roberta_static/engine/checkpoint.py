"""Checkpoints of a distillation run: the pass's state, and what a resume must find unchanged.

One writer and one reader for every engine: a checkpoint is a :class:`PassState` saved with the
run's options, corpus identity and vocabulary, so any checkpoint resumes on any engine and any
number of workers. Written into ``OUT/.checkpoint/`` under a temporary name and renamed into
place, so a crash while writing keeps the previous checkpoint. Everything is numpy
``.npy``/``.npz`` (no pickle) and JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import zipfile
from array import array
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..atomic import missing_folders, remove_if_empty, write_failed
from ..config import DistillConfig
from ..errors import ConfigError, Interrupted
from ..formats.native import CHECKPOINT_DIR, META_FILE
from ..model.batches import pack_inputs, unpack_inputs
from ..stopping import Checkpointing, StopNow
from ..text.corpus import Corpus, CorpusIdentity, Position
from ..text.files import FileList
from ..text.shards import Shard
from ..vectors.target_files import has_targets, read_targets, write_targets
from .quotas import EntryCounts, QuotaPlan
from .state import PassState, ShardState
from .stats import RunStats

FORMAT = 6
_SUMS = ("rows", "sums", "counts", "seen")
_QUOTAS = ("reached_in", "last_quota", "before")


@dataclass
class Checkpoint:
    """A pass's state with what a resume needs to continue it exactly.

    Attributes:
        config: The run's options (``DistillConfig.to_dict``).
        files: The corpus files' absolute paths, so a run resumes from any folder.
        corpus: The identity of the part already read.
        entries: The vocabulary.
        vocabulary: How the vocabulary was built (``vocabulary_stats``).
        state: The pass's state.
        folder: The output folder it was read from (``None`` before it is saved).

    """

    config: dict[str, Any]
    files: FileList
    corpus: CorpusIdentity
    entries: list[str]
    vocabulary: dict[str, int]
    state: PassState
    folder: Path | None = None


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
        _write(staging, checkpoint)
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


def _write(staging: Path, checkpoint: Checkpoint) -> None:
    state = checkpoint.state
    for name in _SUMS:
        np.save(staging / f"{name}.npy", getattr(state, name), allow_pickle=False)
    taken = [shard.taken for shard in state.shards]
    np.savez_compressed(
        staging / "taken.npz",
        entries=np.concatenate([counts.entries for counts in taken] or [np.zeros(0, np.int64)]),
        counts=np.concatenate([counts.counts for counts in taken] or [np.zeros(0, np.int64)]),
    )
    quotas = state.quotas
    if quotas is not None:
        np.savez_compressed(staging / "quotas.npz", **{n: getattr(quotas, n) for n in _QUOTAS})
    leftover = [item for shard in state.shards for item in shard.leftover]
    np.savez(staging / "leftover.npz", **pack_inputs(leftover))
    if state.targets is not None:
        write_targets(state.targets, staging, checkpoint.entries)
    record = {
        "format": FORMAT,
        "config": checkpoint.config,
        "vocabulary": checkpoint.vocabulary,
        "stats": asdict(state.stats),
        "quotas": {"limit": quotas.limit, "counted": quotas.counted} if quotas else None,
        "shards": [_shard_record(shard) for shard in state.shards],
    }
    (staging / "entries.txt").write_text(
        "".join(f"{e}\n" for e in checkpoint.entries), encoding="utf-8"
    )
    identity = checkpoint.corpus
    np.savez_compressed(
        staging / "corpus.npz",
        files=np.frombuffer(checkpoint.files.to_bytes(), dtype=np.uint8),
        sizes=np.array(identity.sizes, dtype=np.int64),
        digests=np.frombuffer(identity.digests, dtype=np.uint8),
        reading=np.array(identity.reading),
    )
    (staging / "state.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


def _read_corpus(target: Path) -> tuple[FileList, CorpusIdentity]:
    """A checkpoint's corpus files and the identity of the part read."""
    with np.load(target / "corpus.npz", allow_pickle=False) as arrays:
        files = FileList.from_bytes(arrays["files"].tobytes())
        sizes, digests = arrays["sizes"], arrays["digests"].tobytes()
        reading = bool(arrays["reading"])
    identity = CorpusIdentity(files[: len(sizes)], array("q", sizes.tolist()), digests, reading)
    return files, identity


def _shard_record(shard: ShardState) -> dict[str, Any]:
    return {
        "start": asdict(shard.shard.start),
        "stop": asdict(shard.shard.stop),
        "position": asdict(shard.position),
        "done": shard.done,
        "stats": asdict(shard.stats),
        "taken": len(shard.taken),
        "leftover": len(shard.leftover),
    }


def checkpoint_entries(folder: Path) -> tuple[str, ...] | None:
    """A checkpoint's entries, when ``folder`` holds one of ours (see ``atomic.OwnEntries``)."""
    if not any(folder.glob(f"{CHECKPOINT_DIR}*/**/state.json")):
        return None
    return (CHECKPOINT_DIR, f"{CHECKPOINT_DIR}.*")


def load_checkpoint(folder: str | os.PathLike) -> Checkpoint:
    """Read ``folder/.checkpoint`` (or the previous one, if a crash hit the swap)."""
    folder = Path(folder)
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
        record = json.loads((target / "state.json").read_text(encoding="utf-8"))
        written = record.get("format", 1) if isinstance(record, dict) else None
        if written == FORMAT:
            entries = (target / "entries.txt").read_text(encoding="utf-8").split("\n")[:-1]
            state = _read_state(target, record)
            if has_targets(target):
                state.targets = read_targets(target, entries)
            files, identity = _read_corpus(target)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as error:
        raise ConfigError(f"{target}: unreadable checkpoint ({error})") from None
    if written != FORMAT:
        raise ConfigError(
            f"{target}: written by an older roberta-static (checkpoint format {written}), which "
            "this one cannot resume; run the distill command again with --overwrite instead of "
            "--resume"
        )
    return Checkpoint(
        record["config"],
        files,
        identity,
        entries,
        record["vocabulary"],
        state,
        folder,
    )


def _read_state(target: Path, record: dict[str, Any]) -> PassState:
    rows, summed, counts, seen = (
        np.load(target / f"{name}.npy", allow_pickle=False) for name in _SUMS
    )
    with np.load(target / "taken.npz", allow_pickle=False) as taken:
        entries, taken_counts = taken["entries"], taken["counts"]
    with np.load(target / "leftover.npz", allow_pickle=False) as arrays:
        leftover = iter(unpack_inputs(arrays))
    states, at = [], 0
    for item in record["shards"]:
        shard = Shard(Position(**item["start"]), Position(**item["stop"]))
        end = at + item["taken"]
        states.append(
            ShardState(
                shard,
                Position(**item["position"]),
                EntryCounts(entries[at:end].copy(), taken_counts[at:end].copy()),
                RunStats(**item["stats"]),
                item["done"],
                [next(leftover) for _ in range(item["leftover"])],
            )
        )
        at = end
    quotas = None
    if record["quotas"] is not None:
        with np.load(target / "quotas.npz", allow_pickle=False) as arrays:
            plan = {name: arrays[name] for name in _QUOTAS}
        quotas = QuotaPlan(record["quotas"]["limit"], **plan, counted=record["quotas"]["counted"])
    stats = RunStats(**record["stats"])
    return PassState(rows, summed, counts, stats, states, seen=seen, quotas=quotas)


def check_resume(
    checkpoint: Checkpoint,
    config: DistillConfig,
    files: list[Path],
    entries: list[str] | None = None,
    vocab_name: str = "the vocabulary",
) -> None:
    """Refuse to continue ``checkpoint`` with ``config`` over ``files``, naming what differs.

    ``entries``: the vocabulary passed again, if any (it must be the checkpoint's), called
    ``vocab_name`` in the message.
    """
    found = differences(checkpoint, config, files)
    if entries is not None and list(entries) != checkpoint.entries:
        found.append(f"{vocab_name} differs from the checkpoint's")
    if found:
        where = checkpoint.folder or "the checkpoint"
        raise ConfigError(f"{where}: cannot resume: " + "; ".join(found))


def differences(checkpoint: Checkpoint, config: DistillConfig, files: list[Path]) -> list[str]:
    """Why ``config`` over ``files`` cannot continue ``checkpoint``, one phrase each.

    Only options that change the vectors count (runtime options may change), and only the part of
    the corpus read so far: a file may move, and a file may change after the checkpoint's position.
    """
    found = []
    saved = checkpoint.config
    defaults = {item.name: item.default for item in fields(DistillConfig)}
    for key, value in config.result_options().items():
        before = saved.get(key, defaults[key])  # an option newer than the checkpoint: its default
        if before != value:
            found.append(f"{key} was {before!r}, now {value!r}")
    if len(files) < len(checkpoint.corpus.sizes):
        return [*found, "the corpus files differ"]
    now = CorpusIdentity.of(files, checkpoint.state.read_up_to(len(checkpoint.files)))
    return [*found, *now.differences(checkpoint.corpus)]


class Saver:
    """A pass's checkpoints: every ``every_seconds``, and when the run is asked to stop.

    Args:
        checkpointing: Where and when; ``None``: never.
        config: The run's options.
        corpus: The corpus files read (``None``: texts in memory, never saved).
        entries: The vocabulary's entries and how it was built.
        vocabulary: ``vocabulary_stats`` of the vocabulary.
        seconds_before: Time the runs it resumes took.

    """

    def __init__(
        self,
        checkpointing: Checkpointing | None,
        config: DistillConfig,
        corpus: Corpus | None,
        entries: list[str],
        vocabulary: dict[str, int],
        seconds_before: float = 0.0,
    ) -> None:
        self.checkpointing, self.config, self.corpus = checkpointing, config, corpus
        self.entries, self.vocabulary = entries, vocabulary
        self.seconds_before = seconds_before
        self.started = self.last_saved = time.monotonic()
        # Resolved and digested once: a folder of many files is checkpointed again and again.
        self.absolute: FileList | None = None
        self.identity: CorpusIdentity | None = None

    @property
    def stop(self) -> Any:
        """The event that asks the run to stop (``None`` without checkpointing)."""
        return self.checkpointing.stop if self.checkpointing is not None else None

    @property
    def stopping(self) -> bool:
        """Whether the run was asked to stop."""
        return self.stop is not None and self.stop.is_set()

    def due(self) -> bool:
        """Whether a periodic checkpoint is due."""
        every = self.checkpointing.every_seconds if self.checkpointing is not None else 0
        return bool(every) and time.monotonic() - self.last_saved >= every

    def save(self, state: PassState) -> None:
        """Write ``state`` as the checkpoint (its seconds: the runs before and this one)."""
        if self.checkpointing is None or self.corpus is None:
            return
        state.stats.seconds = self.seconds_before + time.monotonic() - self.started
        files = self.corpus.files
        if self.absolute is None:
            self.absolute = files.resolved()
        self.identity = CorpusIdentity.of(
            files, state.read_up_to(len(files)), self.absolute, self.identity
        )
        checkpoint = Checkpoint(
            config=self.config.to_dict(),
            files=self.absolute,
            corpus=self.identity,
            entries=self.entries,
            vocabulary=self.vocabulary,
            state=state,
        )
        save_checkpoint(self.checkpointing.folder, checkpoint)
        self.checkpointing.written = True
        self.last_saved = time.monotonic()

    def stopped(self, state: PassState, summed_any: bool) -> NoReturn:
        """End a stopped run: save ``state`` and raise :class:`Interrupted` saying how to resume.

        Raises:
            StopNow: This run summed nothing, so there is nothing new to save.
            Interrupted: Saved.

        """
        if not summed_any or self.checkpointing is None:
            raise StopNow
        self.save(state)
        folder = self.checkpointing.folder
        raise Interrupted(
            f"stopped; checkpoint in {folder / CHECKPOINT_DIR}; "
            f"resume with: roberta-static distill --resume {folder}"
        )
