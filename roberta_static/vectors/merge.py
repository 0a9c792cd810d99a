"""Merge vectors distilled over different texts: the count-weighted mean of each entry.

A distilled entry is the mean over the occurrences it used, and its count says how many. Weighting
each input's vector by its count and dividing by the summed count gives the mean over all of
them, so the vectors grow with new text without reading the old text again. With
``max_contexts=0`` (every occurrence) and one vocabulary, merging the folders of two halves of a
corpus gives the folder of the whole corpus, up to float32 rounding, with the same counts. Under
``max_contexts=N`` each input used at most N occurrences of an entry, so a merged entry may
average more than N (its count is the sum).

Only vectors of one model and the same result-changing options
(:meth:`~roberta_static.config.DistillConfig.result_options`, the ones ``--resume`` compares) are
merged; post-processed vectors are refused, as their mean is not the post-processed mean.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DistillConfig
from ..errors import VectorsError
from ..formats import native
from ..version import __version__
from .data import VectorData
from .target_files import has_targets, read_targets
from .targets import SentenceTargets


def merge(inputs: Sequence[VectorData], names: Sequence[str] | None = None) -> VectorData:
    """The count-weighted mean of vectors distilled with one model and the same options.

    Entries are the union of the inputs' (rows: the first input's, then each later input's new
    entries) and counts are summed. An entry that some input filled (count 0, see
    ``fill_unseen``) takes its vector from the inputs that saw it; one that no input saw keeps the
    mean of the inputs' fills, with count 0. ``meta`` records each input (``merged``), the corpus
    files of all, and statistics summed over them.

    Args:
        inputs: Two or more vectors as ``distill`` made them (their ``meta`` says how).
        names: What to call each input in errors and in ``meta``'s records (default: ``input 1``,
            ...; :func:`merge_folders` gives the folders' paths).

    Raises:
        VectorsError: Fewer than two inputs, one given twice, one without ``distill``'s
            metadata or post-processed, or two that differ in the model or a result-changing
            option (the message names it and the two inputs).

    Example:
        >>> config = {"config": {"model": "m", "layers": [1]}, "corpus": []}
        >>> a = VectorData(["cat"], np.array([[1.0, 0.0]]), np.array([1]), config)
        >>> b = VectorData(["cat", "dog"], np.array([[4.0, 3.0], [0.0, 1.0]]), [3, 2], config)
        >>> merged = merge([a, b])
        >>> merged.words, merged.vectors.tolist(), merged.counts.tolist()
        (['cat', 'dog'], [[3.25, 2.25], [0.0, 1.0]], [4, 2])

    """
    names = list(names or [f"input {number}" for number in range(1, len(inputs) + 1)])
    check_mergeable(inputs, names)
    index = {word: row for row, word in enumerate(dict.fromkeys(_all_words(inputs)))}
    rows = [
        np.fromiter((index[word] for word in data.words), np.int64, len(data)) for data in inputs
    ]
    counts = np.zeros(len(index), dtype=np.int64)
    for data, where in zip(inputs, rows, strict=True):
        counts[where] += data.counts
    vectors = _weighted_means(inputs, rows, counts)
    meta = _merged_meta(inputs, names, list(index), counts)
    targets = _merged_targets(inputs, rows, names)
    return VectorData(list(index), vectors, counts, meta, targets=targets)


def _merged_targets(
    inputs: Sequence[VectorData], rows: list[np.ndarray], names: Sequence[str]
) -> SentenceTargets | None:
    """The sentence targets of the texts of all inputs (those of the smallest keys over all).

    Raises:
        VectorsError: Some inputs hold targets and others do not.

    """
    held = [data.targets is not None for data in inputs]
    if not any(held):
        return None
    if not all(held):
        have, lack = names[held.index(True)], names[held.index(False)]
        raise VectorsError(
            f"merge: {have} holds sentence targets and {lack} does not; merge vectors that all "
            "kept them (distill --sentence-targets) or none"
        )
    merged = None
    for data, where in zip(inputs, rows, strict=True):
        renamed = data.targets.reindexed(where)  # type: ignore[union-attr]
        merged = renamed if merged is None else merged.merge(renamed)
    return merged


def merge_folders(folders: Sequence[str | os.PathLike]) -> VectorData:
    """:func:`merge` the vectors folders ``distill`` wrote; ``meta`` records each folder's path.

    Raises:
        VectorsError: A folder is missing, a file (an export, say), not a vectors folder or
            unreadable (named), or the folders cannot be merged (see :func:`merge`).

    Example:
        >>> merged = merge_folders(["vectors-march", "vectors-april"])  # doctest: +SKIP

    """
    paths = [Path(folder) for folder in folders]
    seen: dict[Path, Path] = {}
    for path in paths:
        if path.resolve() in seen:
            raise VectorsError(f"merge: {seen[path.resolve()]} is given twice (also as {path})")
        seen[path.resolve()] = path
    return merge([_read(path) for path in paths], [str(path) for path in paths])


def _read(path: Path) -> VectorData:
    if path.is_file():
        folder = path.parent
        then = "merge the folders distill wrote instead"
        if native.detect(folder):
            then = f"pass {folder}, the vectors folder it is in"
        raise VectorsError(
            f"{path}: a file, and merge reads vectors folders only (as distill writes them: "
            f"{', '.join(native.FILES)}; exports record no options to merge by); {then}"
        )
    if not path.is_dir():
        raise VectorsError(f"{path}: no such vectors folder")
    data = native.read(path, mmap=True)  # rows are read once, as they are added
    if has_targets(path):
        data.targets = read_targets(path, data.words)
    return data


def check_mergeable(inputs: Sequence[VectorData], names: Sequence[str]) -> None:
    """Refuse inputs that :func:`merge` cannot average, naming the input and the reason.

    Raises:
        VectorsError: See :func:`merge`.

    """
    if len(inputs) < 2:
        raise VectorsError(f"merge needs at least two vectors, got {len(inputs)}")
    for number, data in enumerate(inputs):
        twin = next((i for i in range(number) if inputs[i] is data), None)
        if twin is not None:
            raise VectorsError(f"merge: {names[twin]} is given twice (also as {names[number]})")
    facts = [_facts(data.meta, name) for data, name in zip(inputs, names, strict=True)]
    for name, other in zip(names[1:], facts[1:], strict=True):
        difference = _difference(facts[0], other)
        if difference:
            raise VectorsError(f"merge: {names[0]} and {name} differ in {difference}")


def _facts(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """What inputs must share: the model's weights and the options that change the vectors."""
    missing = [key for key in ("config", "corpus") if key not in meta]
    if missing:
        raise VectorsError(
            f"{name}: its metadata records no {missing[0]} (meta.json); merge reads folders "
            "distill wrote"
        )
    if "tune" in meta:
        raise VectorsError(
            f"{name}: tuned (roberta-static tune), and tuned vectors do not average; merge the "
            "folders distill wrote"
        )
    steps = [_step_text(step) for step in meta.get("postprocessing") or []]
    if steps:
        raise VectorsError(
            f"{name}: post-processed ({'; '.join(steps)}), and the mean of post-processed "
            "vectors is not post-processed vectors; merge the folders distill wrote without "
            "post-processing, then post-process the merged one"
        )
    try:
        options = DistillConfig(**meta["config"]).result_options()
    except (TypeError, ValueError) as error:
        raise VectorsError(f"{name}: cannot read its options in meta.json ({error})") from None
    model = meta.get("model") or {}
    # The same weights under another path (a folder moved, named relatively) are the same model.
    options["model"] = _Model(options["model"], model.get("sha256"), model.get("revision"))
    return options


class _Model:
    """A model as inputs compare it: by its weights' SHA-256 where known, else name and revision."""

    def __init__(self, name: str, sha256: str | None, revision: str | None) -> None:
        self.name, self.sha256, self.revision = name, sha256, revision

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Model):
            return NotImplemented
        if self.sha256 or other.sha256:
            return self.sha256 == other.sha256
        return (self.name, self.revision) == (other.name, other.revision)

    __hash__ = None  # type: ignore[assignment]  # compared, never a key

    def __str__(self) -> str:
        if self.sha256:
            return f"{self.name} (weights sha256 {self.sha256[:12]})"
        return f"{self.name}@{self.revision}" if self.revision else self.name


def _difference(first: dict[str, Any], second: dict[str, Any]) -> str | None:
    """``option: A against B`` for the first option the two differ in, or None."""
    for key in dict.fromkeys([*first, *second]):
        if first.get(key) != second.get(key):
            return f"{key}: {_shown(first.get(key))} against {_shown(second.get(key))}"
    return None


def _shown(value: Any) -> str:
    if isinstance(value, (str, _Model)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _step_text(step: dict[str, Any]) -> str:
    """``center, remove_top_pcs 2`` for a recorded post-processing step."""
    return ", ".join(k if v is True else f"{k} {v}" for k, v in step.items() if v)


def _all_words(inputs: Sequence[VectorData]) -> list[str]:
    return [word for data in inputs for word in data.words]


def _weighted_means(
    inputs: Sequence[VectorData], rows: list[np.ndarray], counts: np.ndarray
) -> np.ndarray:
    """Each entry's count-weighted mean; an entry no input saw: the plain mean of its fills."""
    sums = np.zeros((len(counts), inputs[0].dim), dtype=np.float64)
    weights = np.zeros(len(counts), dtype=np.float64)
    for data, where in zip(inputs, rows, strict=True):
        weight = np.where(counts[where] > 0, data.counts, 1).astype(np.float64)
        sums[where] += weight[:, None] * data.vectors  # float64 sums, as distill's accumulator
        weights[where] += weight
    return (sums / weights[:, None]).astype(np.float32)


def _merged_meta(
    inputs: Sequence[VectorData], names: Sequence[str], words: list[str], counts: np.ndarray
) -> dict[str, Any]:
    """The first input's options and model, every input's corpus, summed statistics, provenance."""
    first = inputs[0].meta
    return {
        "package": {"name": "roberta-static", "version": __version__},
        "config": first["config"],
        "model": first.get("model", {}),
        "corpus": [item for data in inputs for item in data.meta["corpus"]],
        "stats": _merged_stats([data.meta.get("stats") or {} for data in inputs], words, counts),
        "postprocessing": [],
        "merged": [_provenance(data, name) for data, name in zip(inputs, names, strict=True)],
    }


def _merged_stats(
    stats: list[dict[str, Any]], words: list[str], counts: np.ndarray
) -> dict[str, Any]:
    """Counters summed over the inputs; the entries found, filled and missed, of the union."""
    summed = {
        key: sum(part[key] for part in stats)
        for key in stats[0]
        if all(_is_number(part.get(key)) for part in stats)
    }
    seen = {word for word, count in zip(words, counts.tolist(), strict=True) if count > 0}
    not_encoded = _unseen(stats, "entries_not_encoded", seen)
    not_found = _unseen(stats, "entries_not_found", seen | set(not_encoded))
    return {
        **summed,
        "entries": len(set(words) | set(not_found) | set(not_encoded)),
        "entries_found": len(seen),
        "entries_filled": len(words) - len(seen),
        "entries_not_found": not_found,
        "entries_not_encoded": not_encoded,
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unseen(stats: list[dict[str, Any]], key: str, seen: set[str]) -> list[str]:
    """The entries that inputs list under ``key`` and none saw, in the order first listed."""
    listed = dict.fromkeys(word for part in stats for word in part.get(key, []))
    return [word for word in listed if word not in seen]


def _provenance(data: VectorData, name: str) -> dict[str, Any]:
    """What ``meta.json`` keeps of one input: where, who wrote it, from what, with what counts."""
    meta, stats = data.meta, data.meta.get("stats") or {}
    model = meta.get("model") or {}
    record = {
        "path": name,
        "version": (meta.get("package") or {}).get("version"),
        "model": {key: model[key] for key in ("name", "revision", "sha256") if model.get(key)},
        "corpus": meta["corpus"],
        "entries": len(data),
        "entries_found": int((data.counts > 0).sum()),
        "occurrences": int(data.counts.sum()),
        "sentences": stats.get("sentences"),
        "seconds": stats.get("seconds"),
    }
    if "merged" in meta:  # an input that is itself a merge keeps its inputs
        record["merged"] = meta["merged"]
    return record
