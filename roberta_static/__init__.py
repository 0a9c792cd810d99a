"""Distill static word vectors from RoBERTa and other transformers, for gensim and spaCy.

Example:
    >>> from roberta_static import DistillConfig, distill  # doctest: +SKIP
    >>> config = DistillConfig(model="roberta-base")  # doctest: +SKIP
    >>> vecs = distill("corpus.txt", "vocab.txt", config)  # doctest: +SKIP
    >>> vecs.to_keyed_vectors().most_similar("cat")  # doctest: +SKIP

"""

from __future__ import annotations

import logging
import os

from .config import DistillConfig, parse_layers
from .debug import debugging, show_log
from .errors import (
    ConfigError,
    CorpusError,
    KeyNotFoundError,
    ModelLoadError,
    OutputError,
    RobertaStaticError,
    RobertaStaticWarning,
    VectorsError,
    VocabError,
)
from .vectors.static import StaticVectors
from .version import __version__

# In a source checkout the subpackages ``cli`` and ``spacy_plugin`` are top-level folders that
# setup.cfg maps into this package at install time. Imported from a checkout (which shadows the
# installed copy whenever the checkout is the working directory), the package also looks for its
# subpackages in the checkout's root, so ``roberta_static.spacy_plugin`` (which spaCy imports for
# every pipeline, through our entry point) and ``roberta_static.cli`` are found there too.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(__path__[0], "spacy_plugin")) and all(
    os.path.isfile(os.path.join(_checkout, sub, "__init__.py")) for sub in ("cli", "spacy_plugin")
):
    __path__.append(_checkout)

# A library's logger prints nothing until its user configures logging (as gensim's and spaCy's),
# or asks for it with ROBERTA_STATIC_DEBUG=1.
logging.getLogger(__name__).addHandler(logging.NullHandler())
show_log(debugging())


def __getattr__(name: str) -> object:
    # torch and transformers load only when the distillation API is first used.
    if name in {"distill", "distill_from_model", "Progress"}:
        from . import api as module

        return getattr(module, name)
    if name in {"tune", "TuneConfig"}:
        from .tuning import config, run

        return getattr(run if name == "tune" else config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "CorpusError",
    "DistillConfig",
    "KeyNotFoundError",
    "ModelLoadError",
    "OutputError",
    "Progress",
    "RobertaStaticError",
    "RobertaStaticWarning",
    "StaticVectors",
    "VectorsError",
    "VocabError",
    "__version__",
    "distill",
    "distill_from_model",
    "parse_layers",
    "tune",
    "TuneConfig",
]
