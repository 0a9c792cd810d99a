"""Load distilled vectors from ``[initialize.before_init]`` (``roberta_static.load_vectors.v1``).

The callback is registered in ``factories.py``; this module does the loading.
"""

from __future__ import annotations

from collections.abc import Callable

from spacy.language import Language

from .component import RobertaStaticVectors
from .settings import CasePolicy, Mode
from .tables import check_source


def vectors_loader(
    path: str, mode: Mode = "replace", case: CasePolicy = "auto", allow_pickle: bool = False
) -> Callable[[Language], Language]:
    """Return a callback that loads the vectors at ``path`` into ``nlp.vocab``.

    The pipeline's ``roberta_static`` component does the loading when there is one, so it also
    saves the lookup attribute with the pipeline. A missing ``path`` is named as the config
    spells it (``path``), not as the component's ``vectors``.
    """

    def load_vectors(nlp: Language) -> Language:
        check_source(path, option="path")
        component = next(
            (pipe for name, pipe in nlp.components if isinstance(pipe, RobertaStaticVectors)),
            None,
        )
        if component is None:  # no component keeps a document weighting: none is found
            component = RobertaStaticVectors(
                nlp, mode=mode, case=case, allow_pickle=allow_pickle, doc_vector="mean"
            )
        component.load(path)
        return nlp

    return load_vectors
