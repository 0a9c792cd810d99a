"""A loadable spaCy pipeline holding distilled vectors: what ``roberta-static spacy-init`` writes.

The pipeline is a base (a blank one, or an installed pipeline) with the ``roberta_static``
component added, its vectors loaded; ``spacy.load`` opens the folder anywhere this package is
installed, without the vectors it was made from.
"""

from __future__ import annotations

import os
from pathlib import Path

import spacy
from spacy.language import Language

from roberta_static.atomic import atomic_directory, check_not_source, check_output_dir, output_lock
from roberta_static.errors import ConfigError
from roberta_static.outputs import PIPELINE_MARK, pipeline_entries
from roberta_static.version import __version__

from .settings import DEFAULT_DOC_VECTOR, DocVector

BLANK = "blank:"


def build_pipeline(
    vectors: str | os.PathLike,
    base: str = "blank:en",
    *,
    replace_trained_vectors: bool = False,
    allow_pickle: bool = False,
    doc_vector: DocVector = DEFAULT_DOC_VECTOR,
) -> Language:
    """A pipeline made of ``base`` and the ``roberta_static`` component holding ``vectors``.

    Args:
        vectors: A vectors folder from distill, a word2vec ``.txt``/``.bin`` file, or a gensim
            ``.kv`` file (with ``allow_pickle``).
        base: ``blank:LANG``, or an installed pipeline's name or path.
        replace_trained_vectors: Replace vectors the base's trained components were built on.
        allow_pickle: Accept a ``.kv`` file, which is a pickle: only files you trust.
        doc_vector: The component's ``doc_vector``: ``weighted`` or ``mean``.

    Raises:
        ConfigError: ``base`` cannot be loaded.

    Example:
        >>> nlp = build_pipeline("out/example")  # doctest: +SKIP
        >>> nlp("cat").vector.shape  # doctest: +SKIP

    """
    try:
        nlp = spacy.blank(base.removeprefix(BLANK)) if base.startswith(BLANK) else spacy.load(base)
    except (OSError, ImportError) as error:
        raise ConfigError(f"cannot load {base!r} ({error})", field="base") from None
    nlp.add_pipe(
        "roberta_static",
        config={
            "vectors": str(vectors),
            "replace_trained_vectors": replace_trained_vectors,
            "allow_pickle": allow_pickle,
            "doc_vector": doc_vector,
        },
    )
    # The mark by which --overwrite knows the folder as one spacy-init wrote.
    nlp.meta[PIPELINE_MARK] = {"written_by": "roberta-static spacy-init", "version": __version__}
    return nlp


def write_pipeline(
    vectors: str | os.PathLike,
    out: str | os.PathLike,
    base: str = "blank:en",
    *,
    overwrite: bool = False,
    replace_trained_vectors: bool = False,
    allow_pickle: bool = False,
    doc_vector: DocVector = DEFAULT_DOC_VECTOR,
) -> Language:
    """Write :func:`build_pipeline`'s pipeline into the folder ``out``, swapped in when complete.

    ``out`` is held while the pipeline is made (a second writer is refused), and checked before
    the base and the vectors load. ``overwrite`` replaces only a pipeline folder that this
    function wrote. Other arguments are :func:`build_pipeline`'s.

    Returns:
        The pipeline written.

    Raises:
        OutputError: ``out`` is the vectors' own folder, is not empty and not ``overwrite``, holds
            what this function did not write, or cannot be written.
        ConfigError: ``base`` cannot be loaded.

    Example:
        >>> write_pipeline("out/example", "pipeline")  # doctest: +SKIP
        >>> spacy.load("pipeline")  # doctest: +SKIP

    """
    out = Path(out)
    check_not_source(out, Path(vectors))
    with output_lock(out):
        check_output_dir(out, overwrite, [pipeline_entries])
        nlp = build_pipeline(
            vectors,
            base,
            replace_trained_vectors=replace_trained_vectors,
            allow_pickle=allow_pickle,
            doc_vector=doc_vector,
        )
        with atomic_directory(out, overwrite, [pipeline_entries]) as staging:
            nlp.to_disk(staging)
    return nlp
