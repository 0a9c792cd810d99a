"""The ``roberta_static`` pipeline component: distilled vectors in ``nlp.vocab.vectors``.

>>> nlp = spacy.blank("en")  # doctest: +SKIP
>>> nlp.add_pipe("roberta_static", config={"vectors": "out/example"})  # doctest: +SKIP
>>> nlp("Paris").similarity(nlp("London"))  # doctest: +SKIP

spaCy reads ``token.vector`` from the vocabulary. The component owns how the table got there:
loading, the case policy (``Vectors.attr``, which spaCy 3.8 does not save with the vocabulary, so
``from_disk`` restores it), and refusing to swap vectors that trained components depend on. With
``doc_vector = "weighted"`` it also gives each document hooks that make ``doc.vector`` and
``doc.similarity`` (and a span's) the weighted exports' (:mod:`.hooks`), with the weighting found
when it loads vectors and saved with it; vectors ``tune`` made bring their learned weights and
offset, which replace SIF weighting and removing components.
"""

from __future__ import annotations

import json
import warnings
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
from roberta_static.vectors.docvectors import DocWeighting, too_few

from .hooks import WeightedDocVectors, install_mean
from .settings import (
    DEFAULT_DOC_VECTOR,
    DOC_VECTORS,
    REMOVE_TOP_PCS,
    SIF_COEFFICIENT,
    CasePolicy,
    DocVector,
    Mode,
)
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

WEIGHTING = "doc_vectors.msgpack"


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
        doc_vector: DocVector = DEFAULT_DOC_VECTOR,
        remove_top_pcs: int = REMOVE_TOP_PCS,
        sif_coefficient: float = SIF_COEFFICIENT,
    ) -> None:
        if mode not in ("replace", "add"):
            raise ConfigError(f"roberta_static: mode: expected 'replace' or 'add', got {mode!r}")
        if doc_vector not in DOC_VECTORS:
            raise ConfigError(
                f"roberta_static: doc_vector: expected 'mean' or 'weighted', got {doc_vector!r}"
            )
        DocWeighting.check(remove_top_pcs, sif_coefficient)
        self.nlp = nlp
        self.name = name
        self.mode = mode
        self.case = case
        self.allow_pickle = allow_pickle
        self.replace_trained_vectors = replace_trained_vectors
        self.doc_vector = doc_vector
        self.remove_top_pcs = remove_top_pcs
        self.sif_coefficient = sif_coefficient
        self.attr: str | None = None
        self.weighted: WeightedDocVectors | None = None  # found when vectors load, if weighted

    @property
    def vocab(self) -> Any:
        """The pipeline's vocabulary."""
        return self.nlp.vocab

    def __call__(self, doc: Doc) -> Doc:
        """Return the doc, with the weighted vector hooks when ``doc_vector`` is ``weighted``.

        Its tokens find their vectors through the vocabulary. Otherwise (``mean``, or too few
        vectors to weight) the doc's and its spans' ``vector`` is spaCy's mean, read by
        :func:`~.hooks.mean_vector`; until vectors load, spaCy's own.
        """
        if self.doc_vector == "weighted" and self.weighted is not None:
            self.weighted.install(doc)
        elif self.attr is not None:
            install_mean(doc)
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 1000) -> Iterable[Doc]:
        """Return the docs as ``__call__`` does."""
        for doc in docs:
            yield self(doc)

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
        # Found first: vectors it refuses leave the pipeline as it was.
        weighted = self._weighting(source) if self.doc_vector == "weighted" else self.weighted
        if self.mode == "add":
            table = merged_table(current, strings, source)
        else:
            table = build_table(strings, source, current.name)
        self.vocab.vectors = table
        self.attr = source.attr
        self.weighted = weighted

    def _weighting(self, source: VectorSource) -> WeightedDocVectors | None:
        """``source``'s weighted document vectors; None (spaCy's average) for a handful of vectors.

        A handful (a test table, a textcat's tiny vocabulary) still loads, with a warning.
        Tuned vectors bring their learned weights, and no components are removed from them.
        """
        tuned = source.weights is not None
        if not tuned and too_few(len(source.words), source.matrix.shape[1], self.remove_top_pcs):
            warnings.warn(
                f"roberta_static: {len(source.words)} vectors are too few for doc_vector "
                f"'weighted' (it removes {self.remove_top_pcs} principal components); documents "
                "take spaCy's average",
                stacklevel=2,
            )
            return None
        strings = self.vocab.strings
        return WeightedDocVectors.fit(strings, source, self.remove_top_pcs, self.sif_coefficient)

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
    # attribute and the document weighting, and the saved config stops pointing at the original
    # vectors path.
    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = tuple()) -> None:
        """Write the component's settings and document weighting to ``path``."""
        serialize = {
            "cfg.json": lambda p: srsly.write_json(p, self._cfg()),
            WEIGHTING: lambda p: p.write_bytes(self._weighting_bytes()),
        }
        util.to_disk(path, serialize, exclude)
        _forget_source_path(Path(path), self.name)

    def from_disk(
        self, path: str | Path, *, exclude: Iterable[str] = tuple()
    ) -> RobertaStaticVectors:
        """Read the settings and weighting, and restore the vectors' lookup attribute."""
        deserialize = {
            "cfg.json": lambda p: self._set_cfg(srsly.read_json(p)),
            # A pipeline saved before document weighting has no such file.
            WEIGHTING: lambda p: self._set_weighting(p.read_bytes() if p.is_file() else b""),
        }
        util.from_disk(path, deserialize, exclude)
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """Serialise the component's settings and document weighting."""
        serialize = {"cfg": lambda: json.dumps(self._cfg()), WEIGHTING: self._weighting_bytes}
        return util.to_bytes(serialize, exclude)

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = tuple()) -> RobertaStaticVectors:
        """Restore the settings, the weighting and the vectors' lookup attribute."""
        deserialize = {
            "cfg": lambda b: self._set_cfg(json.loads(b)),
            WEIGHTING: self._set_weighting,
        }
        util.from_bytes(data, deserialize, exclude)
        return self

    def _cfg(self) -> dict[str, Any]:
        return {
            "attr": self.attr,
            "mode": self.mode,
            "case": self.case,
            "doc_vector": self.doc_vector,
            "remove_top_pcs": self.remove_top_pcs,
            "sif_coefficient": self.sif_coefficient,
        }

    def _weighting_bytes(self) -> bytes:
        return b"" if self.weighted is None else self.weighted.to_bytes()

    def _set_weighting(self, data: bytes) -> None:
        self.weighted = WeightedDocVectors.from_bytes(data) if data else None

    def _set_cfg(self, cfg: dict[str, Any]) -> None:
        # Settings a pipeline saved before them lacks keep the config's values.
        for name in ("doc_vector", "remove_top_pcs", "sif_coefficient"):
            setattr(self, name, cfg.get(name, getattr(self, name)))
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
