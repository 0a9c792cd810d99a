"""The ``roberta-static`` command line: thin commands over the library."""

from __future__ import annotations

import typer

from .distill import distill_command
from .quality import evaluate_command, postprocess_command, sweep_command
from .spacy_init import spacy_init_command
from .vectors import export_command, info_command, similar_command

app = typer.Typer(
    name="roberta-static",
    help="Distill static word vectors from RoBERTa and other transformers, for gensim and spaCy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("distill")(distill_command)
app.command("export")(export_command)
app.command("info")(info_command)
app.command("similar")(similar_command)
app.command("spacy-init")(spacy_init_command)
app.command("evaluate")(evaluate_command)
app.command("sweep")(sweep_command)
app.command("postprocess")(postprocess_command)


def main() -> None:
    """Entry point of the console script and ``python -m roberta_static``."""
    app()
