"""``tune``: learn from a vectors folder's sentence targets a new, tuned vectors folder.

The folder's ``targets/`` (kept by ``distill``) holds the teacher's vector of up to N sentences
and the entries each one holds. Tuning learns each entry's vector and weight so that a sentence's
weighted mean of its entries' vectors predicts the teacher's vector through a linear head, which
is then folded into the vectors or dropped (:mod:`.training`). The tuned folder holds the new
vectors, their weights (``weights.npy``), the head's bias (``offset.npy``, when folded) and, in
``meta.json``, how they were trained (``tune``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..atomic import check_not_source, check_output_dir
from ..errors import VectorsError
from ..formats import native
from ..formats.exports import vectors_folder_entries
from ..progress import TuneProgress
from ..vectors.data import VectorData
from ..vectors.docvectors import DocWeighting
from ..vectors.postprocess import PostProcessing, remove_axes
from ..vectors.static import StaticVectors
from ..vectors.target_files import read_targets
from ..vectors.targets import SentenceTargets
from .config import TuneConfig


def tune(
    vectors: str | os.PathLike,
    out: str | os.PathLike,
    config: TuneConfig | None = None,
    *,
    overwrite: bool = False,
    progress: Callable[[TuneProgress], None] | None = None,
) -> StaticVectors:
    """Learn tuned vectors from the sentence targets of the vectors folder ``vectors``.

    Training starts from what the spaCy component's ``doc_vector = "weighted"`` computes for the
    untuned vectors (top components removed, SIF weights) and keeps the epoch of the best
    held-out loss; see :class:`~.config.TuneConfig` for the options.

    Args:
        vectors: A vectors folder ``distill`` wrote with sentence targets.
        out: The new folder (``vectors.npy``, ``vocab.tsv``, ``weights.npy``, ``meta.json``;
            ``offset.npy`` with the head folded).
        config: The options (default: :class:`~.config.TuneConfig`'s).
        overwrite: Replace ``out`` if it is a vectors folder this package wrote.
        progress: Called after each training step.

    Returns:
        The tuned vectors, as saved.

    Raises:
        VectorsError: ``vectors`` is not a vectors folder, is tuned already, holds no targets,
            or targets that do not match its entries.
        ConfigError: Too few sentences for a held-out split, or a bad option.
        OutputError: ``out`` cannot be written (it is ``vectors``, or holds other files).

    Example:
        >>> tuned = tune("vectors", "vectors-tuned", TuneConfig(seed=1))  # doctest: +SKIP
        >>> tuned.weights[:3]  # doctest: +SKIP

    """
    config = config or TuneConfig()
    source, out = Path(vectors), Path(out)
    check_not_source(out, source)
    check_output_dir(out, overwrite, [vectors_folder_entries])
    data = native.read(source)
    if data.weights is not None or "tune" in data.meta:
        raise VectorsError(f"{source}: tuned already; tune the folder distill wrote")
    targets = read_targets(source, data.words)
    split = held_out_split(targets, config)
    weighting = DocWeighting.fit(data, config.remove_top_pcs, config.sif_coefficient)
    start = remove_axes(data.vectors.astype(np.float64) - weighting.mean, weighting.axes)
    from .training import train  # torch loads only when training

    trained = train(start, weighting.weights, targets, split, config, progress)
    meta = _meta(data, source, targets, split, config, trained.record)
    tuned = StaticVectors(
        data.words, trained.vectors, data.counts, meta, trained.weights, trained.offset
    )
    tuned.save(out, overwrite=overwrite)
    return tuned


def held_out_split(targets: SentenceTargets, config: TuneConfig) -> tuple[np.ndarray, np.ndarray]:
    """The training and held-out sentences: those holding an entry, shuffled by the seed.

    Raises:
        ConfigError: Too few such sentences to hold some out.

    """
    usable = np.flatnonzero(np.diff(targets.indptr) > 0)
    held = config.held_out_count(len(usable))
    shuffled = usable[np.random.default_rng(config.seed).permutation(len(usable))]
    return np.sort(shuffled[held:]), np.sort(shuffled[:held])


def _meta(
    data: VectorData,
    source: Path,
    targets: SentenceTargets,
    split: tuple[np.ndarray, np.ndarray],
    config: TuneConfig,
    record: dict[str, object],
) -> dict[str, object]:
    """The source's metadata, with the start's post-processing and the ``tune`` record."""
    meta = dict(data.meta)
    if config.remove_top_pcs:
        steps = PostProcessing(remove_top_pcs=config.remove_top_pcs)
        meta["postprocessing"] = [*meta.get("postprocessing", []), asdict(steps)]
    meta["tune"] = {
        "source": str(source.resolve()),
        "config": config.to_dict(),
        "targets": {
            "sentences": len(targets),
            "train": len(split[0]),
            "held_out": len(split[1]),
            "dim": targets.dim,
            "pooling": targets.pooling,
        },
        **record,
    }
    return meta
