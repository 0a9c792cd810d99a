"""`roberta-static spacy-init`: a loadable spaCy pipeline holding distilled vectors."""

from __future__ import annotations

from pathlib import Path

import typer

from ._util import Arg, Flag, Opt, one_line_errors
from .options import ALLOW_PICKLED_VECTORS, VECTORS_IN


# fmt: off
def spacy_init_command(
    vectors: Path = VECTORS_IN,
    out: Path = Arg(..., help="Folder for the pipeline (spacy.load(OUT) reads it)", show_default=False),
    base: str = Opt("blank:en", "--base", help="blank:LANG, or an installed pipeline's name or path"),
    overwrite: bool = Flag("--overwrite", help="Replace a pipeline folder that spacy-init wrote"),
    replace_trained_vectors: bool = Flag("--replace-trained-vectors", help="Replace vectors that the base pipeline's components were trained on"),
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
) -> None:
    # fmt: on
    """Write a spaCy pipeline (base pipeline + vectors + roberta_static component)."""
    with one_line_errors():
        import spacy

        from roberta_static.atomic import (
            atomic_directory,
            check_not_source,
            check_output_dir,
            output_lock,
        )
        from roberta_static.errors import ConfigError
        from roberta_static.outputs import PIPELINE_MARK, pipeline_entries
        from roberta_static.version import __version__

        check_not_source(out, vectors)
        with output_lock(out):
            check_output_dir(out, overwrite, [pipeline_entries])
            try:
                nlp = spacy.blank(base.removeprefix("blank:")) if base.startswith("blank:") else spacy.load(base)
            except (OSError, ImportError) as error:
                raise ConfigError(f"--base: cannot load {base!r} ({error})") from None
            nlp.add_pipe(
                "roberta_static",
                config={
                    "vectors": str(vectors),
                    "replace_trained_vectors": replace_trained_vectors,
                    "allow_pickle": allow_pickle,
                },
            )
            nlp.meta[PIPELINE_MARK] = {"written_by": "roberta-static spacy-init", "version": __version__}
            with atomic_directory(out, overwrite, [pipeline_entries]) as staging:
                nlp.to_disk(staging)
        typer.echo(f"wrote {out}: {nlp.vocab.vectors.shape[0]:,} vectors; spacy.load({str(out)!r})")
