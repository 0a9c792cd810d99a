"""spaCy integration: the ``roberta_static`` component and the vectors loader callback.

Both are registered through entry points (``spacy_factories``, ``spacy_callbacks``), so
``nlp.add_pipe("roberta_static", ...)`` and configs work without importing this package.
"""

from __future__ import annotations

from .factories import create_vectors_loader, make_roberta_static


def __getattr__(name: str) -> object:
    # The entry points import this package: the component's module loads only when used.
    if name == "RobertaStaticVectors":
        from .component import RobertaStaticVectors

        return RobertaStaticVectors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RobertaStaticVectors", "create_vectors_loader", "make_roberta_static"]
