"""The registrations behind the entry points: the ``roberta_static`` factory and vectors loader.

spaCy imports every ``spacy_factories`` entry point whenever it builds a pipeline, even
``spacy.blank("en")``, so an error raised while importing this module would break all spaCy use
wherever this package is installed. It therefore imports nothing but spaCy and the settings
(a leaf); the component loads when one is first made, and a problem there is reported by
``add_pipe("roberta_static")``.
"""

from __future__ import annotations

from collections.abc import Callable

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import registry

from .settings import DEFAULT_CONFIG, CasePolicy, DocVector, Mode


# spaCy checks the config against these annotations, and silently checks nothing when one does
# not resolve: each must name a type this module has without importing the component.
@Language.factory("roberta_static", default_config=DEFAULT_CONFIG)
def make_roberta_static(
    nlp: Language,
    name: str,
    vectors: str | None,
    mode: Mode,
    case: CasePolicy,
    allow_pickle: bool,
    replace_trained_vectors: bool,
    doc_vector: DocVector,
    remove_top_pcs: int,
    sif_coefficient: float,
) -> Callable[[Doc], Doc]:
    """Create the component; a ``vectors`` path is loaded into ``nlp.vocab`` right away.

    Args:
        nlp: The pipeline.
        name: The component's name.
        vectors: A roberta-static output folder, a word2vec ``.txt``/``.bin`` file, a
            model2vec or sentence-transformers folder (a gensim ``.kv`` needs ``allow_pickle``).
        mode: ``replace`` the pipeline's vectors, or ``add`` to them (same width).
        case: ``auto`` (from the vectors' ``meta.json``, else from their keys), ``lower`` or
            ``keep``.
        allow_pickle: Accept a ``.kv`` file, which is a pickle: unsafe for others' files.
        replace_trained_vectors: Change vectors that trained components were built on.
        doc_vector: ``mean`` (spaCy's own ``doc.vector``: the mean of the token vectors) or
            ``weighted`` (the weighted exports' document vector, through ``doc.user_hooks``).
        remove_top_pcs: ``weighted``: principal components removed, as ``--remove-top-pcs``.
        sif_coefficient: ``weighted``: SIF ``a``, as ``--sif-coefficient``.

    Returns:
        The component, a ``RobertaStaticVectors``.

    """
    from .component import RobertaStaticVectors

    component = RobertaStaticVectors(
        nlp,
        name,
        mode=mode,
        case=case,
        allow_pickle=allow_pickle,
        replace_trained_vectors=replace_trained_vectors,
        doc_vector=doc_vector,
        remove_top_pcs=remove_top_pcs,
        sif_coefficient=sif_coefficient,
    )
    if vectors is not None:
        component.load(vectors)
    return component


@registry.callbacks("roberta_static.load_vectors.v1")
def create_vectors_loader(
    path: str, mode: Mode = "replace", case: CasePolicy = "auto", allow_pickle: bool = False
) -> Callable[[Language], Language]:
    """Return a callback for ``[initialize.before_init]`` that loads the vectors at ``path``.

    Loading before the components initialise lets a ``tok2vec`` with ``include_static_vectors``
    see them::

        [initialize.before_init]
        @callbacks = "roberta_static.load_vectors.v1"
        path = "vectors/"
    """
    from .loaders import vectors_loader

    return vectors_loader(path, mode, case, allow_pickle)
