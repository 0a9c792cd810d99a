"""A registered callback that loads distilled vectors in ``[initialize.before_init]``.

Loading before the components initialise lets a ``tok2vec`` with ``include_static_vectors`` see
them::

    [initialize.before_init]
    @callbacks = "roberta_static.load_vectors.v1"
    path = "vectors/"
"""

from __future__ import annotations

from collections.abc import Callable

from spacy.language import Language
from spacy.util import registry

from .component import Mode, RobertaStaticVectors
from .tables import CasePolicy


@registry.callbacks("roberta_static.load_vectors.v1")
def create_vectors_loader(
    path: str, mode: Mode = "replace", case: CasePolicy = "auto", allow_pickle: bool = False
) -> Callable[[Language], Language]:
    """Return a callback that loads the vectors at ``path`` into ``nlp.vocab``.

    The pipeline's ``roberta_static`` component does the loading when there is one, so it also
    saves the lookup attribute with the pipeline.
    """

    def load_vectors(nlp: Language) -> Language:
        component = next(
            (pipe for name, pipe in nlp.components if isinstance(pipe, RobertaStaticVectors)),
            None,
        )
        if component is None:
            component = RobertaStaticVectors(nlp, mode=mode, case=case, allow_pickle=allow_pickle)
        component.load(path)
        return nlp

    return load_vectors
