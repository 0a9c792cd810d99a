"""The ``roberta_static`` pipeline component: distilled vectors in ``nlp.vocab.vectors``.

>>> nlp = spacy.blank("en")  # doctest: +SKIP
>>> nlp.add_pipe("roberta_static", config={"vectors": "out/example"})  # doctest: +SKIP
>>> nlp("Paris").similarity(nlp("London"))  # doctest: +SKIP

The component does no work per document: spaCy reads ``token.vector`` from the vocabulary. It owns
how the table got there: loading, the case policy (``Vectors.attr``, which spaCy 3.8 does not save
with the vocabulary, so ``from_disk`` restores it), and refusing to swap vectors that trained
components depend on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import srsly
from spacy import util
from spacy.attrs import IDS
from spacy.language import Language
from spacy.tokens import Doc
from thinc.api import Config

from roberta_static.errors import ConfigError

from .settings import CasePolicy, Mode
from .tables import (
    VectorSource,
    build_table,
    check_source,
    merged_table,
    read_vectors,
    uses_static_vectors,
    with_attr,
)

__all__ = ["RobertaStaticVectors"]


class RobertaStaticVectors:
    """Pipeline component that holds distilled static vectors in ``nlp.vocab.vectors``."""

    def __init__(
        self,
        nlp: Language,
        name: str = "roberta_static",
        *,
        mode: Mode = "replace",
        case: CasePolicy = "auto",
        allow_pickle: bool = False,
        replace_trained_vectors: bool = False,
    ) -> None:
        if mode not in ("replace", "add"):
            raise ConfigError(f"roberta_static: mode: expected 'replace' or 'add', got {mode!r}")
        self.nlp = nlp
        self.name = name
        self.mode = mode
        self.case = case
        self.allow_pickle = allow_pickle
        self.replace_trained_vectors = replace_trained_vectors
        self.attr: str | None = None

    @property
    def vocab(self) -> Any:
        """The pipeline's vocabulary."""
        return self.nlp.vocab

    def __call__(self, doc: Doc) -> Doc:
        """Return the doc: its tokens find their vectors through the vocabulary."""
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 1000) -> Iterable[Doc]:
        """Return the docs unchanged."""
        yield from docs

    def load(self, path: str | Path) -> None:
        """Put the vectors at ``path`` into the pipeline's vocabulary.

        Args:
            path: Vectors in any format ``StaticVectors.load`` reads.

        """
        source = read_vectors(check_source(str(path)), self.case, self.allow_pickle)
        self._refuse_breaking_trained_components()
        self._install(source)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Any]] | None = None,
        *,
        nlp: Language | None = None,
        vectors: str | None = None,
    ) -> None:
        """Load vectors in config-driven flows (``[initialize.components.roberta_static]``).

        Args:
            get_examples: Unused: the vectors need no training examples.
            nlp: Unused.
            vectors: Path to load; without it, vectors already loaded are kept.

        """
        if vectors is not None:
            self.load(vectors)

    def _install(self, source: VectorSource) -> None:
        strings = self.vocab.strings
        current = self.vocab.vectors
        if self.mode == "add":
            table = merged_table(current, strings, source)
        else:
            table = build_table(strings, source, current.name)
        self.vocab.vectors = table
        self.attr = source.attr

    def _refuse_breaking_trained_components(self) -> None:
        if self.replace_trained_vectors or self.vocab.vectors.shape[0] == 0:
            return
        users = [
            name
            for name, config in self.nlp.config.get("components", {}).items()
            if name != self.name and uses_static_vectors(config)
        ]
        if users:
            raise ConfigError(
                f"roberta_static: components {users} were trained on this pipeline's vectors; "
                "changing them breaks those components. "
                "Set replace_trained_vectors = true to do it anyway."
            )

    # Serialisation: the table itself travels with the vocabulary; the component keeps the lookup
    # attribute, and the saved config stops pointing at the original vectors path.
    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = tuple()) -> None:
        """Write the component's settings to ``path``."""
        serialize = {"cfg.json": lambda p: srsly.write_json(p, self._cfg())}
        util.to_disk(path, serialize, exclude)
        _forget_source_path(Path(path), self.name)

    def from_disk(
        self, path: str | Path, *, exclude: Iterable[str] = tuple()
    ) -> RobertaStaticVectors:
        """Read the settings and restore the vectors' lookup attribute."""
        deserialize = {"cfg.json": lambda p: self._set_cfg(srsly.read_json(p))}
        util.from_disk(path, deserialize, exclude)
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """Serialise the component's settings."""
        return util.to_bytes({"cfg": lambda: json.dumps(self._cfg())}, exclude)

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = tuple()) -> RobertaStaticVectors:
        """Restore the settings and the vectors' lookup attribute."""
        util.from_bytes(data, {"cfg": lambda b: self._set_cfg(json.loads(b))}, exclude)
        return self

    def _cfg(self) -> dict[str, Any]:
        return {"attr": self.attr, "mode": self.mode, "case": self.case}

    def _set_cfg(self, cfg: dict[str, Any]) -> None:
        self.attr = cfg.get("attr")
        if self.attr is not None and self.vocab.vectors.attr != IDS[self.attr]:
            self.vocab.vectors = with_attr(self.vocab.vectors, self.attr)


def _forget_source_path(component_dir: Path, name: str) -> None:
    """Set ``vectors = null`` for this component in the pipeline's saved ``config.cfg``.

    The vectors are saved with the vocabulary, so ``spacy.load`` must not read (or need) the path
    they were first loaded from. spaCy writes ``config.cfg`` before the components.
    """
    config_path = component_dir.parent / "config.cfg"
    if not config_path.is_file():
        return
    config = Config().from_disk(config_path, interpolate=False)
    section = config.get("components", {}).get(name)
    if section is not None and section.get("vectors") is not None:
        section["vectors"] = None
        config.to_disk(config_path, interpolate=False)
