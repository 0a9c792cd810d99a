"""spaCy integration: the ``roberta_static`` component and the vectors loader callback.

Both are registered through entry points (``spacy_factories``, ``spacy_callbacks``), so
``nlp.add_pipe("roberta_static", ...)`` and configs work without importing this package.
"""

from __future__ import annotations

from .component import RobertaStaticVectors, make_roberta_static
from .loaders import create_vectors_loader

__all__ = ["RobertaStaticVectors", "create_vectors_loader", "make_roberta_static"]
