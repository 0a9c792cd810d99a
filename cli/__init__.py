"""The ``roberta-static`` command line: thin commands over the library."""

from __future__ import annotations

import typer

from roberta_static.debug import DEBUG_VARIABLE, set_debugging
from roberta_static.version import __version__

from ._util import Command, CommandGroup, Flag
from .distill import distill_command
from .finetune import finetune_command
from .quality import evaluate_command, postprocess_command, sweep_command
from .report import report_command
from .spacy_init import spacy_init_command
from .tune import tune_command
from .vectors import export_command, info_command, merge_command, similar_command

app = typer.Typer(
    name="roberta-static",
    help="Distill static word vectors from RoBERTa and other transformers, for gensim and spaCy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=CommandGroup,
)
COMMANDS = {
    "distill": distill_command,
    "finetune": finetune_command,
    "export": export_command,
    "info": info_command,
    "similar": similar_command,
    "spacy-init": spacy_init_command,
    "evaluate": evaluate_command,
    "sweep": sweep_command,
    "postprocess": postprocess_command,
    "merge": merge_command,
    "report": report_command,
    "tune": tune_command,
}
for _name, _function in COMMANDS.items():
    app.command(_name, cls=Command)(_function)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = Flag(
        "--version", help="Print the version and exit", callback=_print_version, is_eager=True
    ),
    debug: bool = Flag(
        "--debug",
        help=f"On an error, print its full traceback (a worker's too), and the log of the run; "
        f"as {DEBUG_VARIABLE}=1 does",
    ),
) -> None:
    set_debugging(debug)


def main() -> None:
    """Entry point of the console script and ``python -m roberta_static``."""
    app()
