"""The folders roberta-static writes, each known again by the mark it leaves.

Each kind is an :data:`~roberta_static.atomic.OwnEntries`: given a folder, the entries that kind
writes there, or None when the folder lacks its mark. ``--overwrite`` replaces only a folder one
of them recognises, and a corpus folder's listing never reads one as text
(:func:`written_by_roberta_static`). The marks live here, in a module that imports nothing heavy,
so that the corpus listing can know them all; a distill checkpoint (``.checkpoint/``) is a hidden
folder, which listings leave out anyway.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .formats.exports import vectors_folder_entries

FINETUNE_FILE = "finetune.json"
RUN_DIR = ".finetune"  # Trainer's checkpoints of an unfinished run, inside the output folder
CSV_FILE = "sweep.csv"
PLOT_FILE = "sweep.png"
CSV_HEADER = (
    "candidate",
    "layers",
    "postprocessing",
    "anisotropy",
    "dataset",
    "spearman",
    "pearson",
    "covered",
    "pairs",
)
PIPELINE_MARK = "roberta_static"  # the key spacy-init adds to a pipeline's meta.json


def finetune_run_entries(folder: Path) -> tuple[str, ...] | None:
    """A fine-tuning output's entries, when ``folder`` holds one (see ``atomic.OwnEntries``)."""
    if (folder / FINETUNE_FILE).is_file() or (folder / RUN_DIR / FINETUNE_FILE).is_file():
        return ("*",)
    return None


def sweep_folder_entries(folder: Path) -> tuple[str, ...] | None:
    """What a sweep folder holds, when ``folder`` is one this package wrote (see ``OwnEntries``).

    The mark is a ``sweep.csv`` that starts with our header.
    """
    try:
        with open(folder / CSV_FILE, encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return (CSV_FILE, PLOT_FILE) if header == list(CSV_HEADER) else None


def pipeline_entries(folder: Path) -> tuple[str, ...] | None:
    """What a pipeline folder holds, when spacy-init wrote it (see ``atomic.OwnEntries``)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get(PIPELINE_MARK), dict):
        return None
    names = {str(name) for key in ("pipeline", "components") for name in meta.get(key, [])}
    # nlp.to_disk writes these, and one folder or file (NAME.json) per component.
    return ("config.cfg", "meta.json", "tokenizer", "vocab", *names, *(f"{n}.*" for n in names))


OUTPUT_KINDS = (
    vectors_folder_entries,
    sweep_folder_entries,
    finetune_run_entries,
    pipeline_entries,
)


def written_by_roberta_static(folder: Path) -> bool:
    """Whether ``folder`` is an output of roberta-static: vectors, a sweep, a model, a pipeline.

    Example:
        >>> written_by_roberta_static(Path("examples"))
        False

    """
    return any(kind(folder) is not None for kind in OUTPUT_KINDS)
