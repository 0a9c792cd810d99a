"""`roberta-static spacy-init`: a loadable spaCy pipeline holding distilled vectors."""

from __future__ import annotations

from pathlib import Path

import typer

from roberta_static.vectors.docvectors import DEFAULT_DOC_VECTOR, DOC_VECTORS

from ._util import Arg, Flag, Opt, choices, one_line_errors
from .options import ALLOW_PICKLED_VECTORS, VECTORS_IN

DocVector = choices("DocVector", DOC_VECTORS)


# fmt: off
def spacy_init_command(
    vectors: Path = VECTORS_IN,
    out: Path = Arg(..., help="Folder for the pipeline (spacy.load(OUT) reads it)", show_default=False),
    base: str = Opt("blank:en", "--base", help="blank:LANG, or an installed pipeline's name or path"),
    overwrite: bool = Flag("--overwrite", help="Replace a pipeline folder that spacy-init wrote"),
    replace_trained_vectors: bool = Flag("--replace-trained-vectors", help="Replace vectors that the base pipeline's components were trained on"),
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
    doc_vector: DocVector = Opt(DEFAULT_DOC_VECTOR, "--doc-vector", help="doc.vector and doc.similarity: 'weighted' (all-but-the-top + SIF, as the weighted exports; the weighting is saved with the pipeline) or 'mean' (spaCy's mean of token vectors)"),
) -> None:
    # fmt: on
    """Write a spaCy pipeline (base pipeline + vectors + roberta_static component)."""
    with one_line_errors():
        # spaCy loads only here, once Typer has checked the options.
        from roberta_static.spacy_plugin.init import write_pipeline

        nlp = write_pipeline(
            vectors, out, base, overwrite=overwrite,
            replace_trained_vectors=replace_trained_vectors, allow_pickle=allow_pickle,
            doc_vector=doc_vector.value,
        )
        typer.echo(f"wrote {out}: {nlp.vocab.vectors.shape[0]:,} vectors; spacy.load({str(out)!r})")
