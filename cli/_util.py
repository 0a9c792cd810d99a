"""Shared pieces of the commands: option helpers and the one-line error boundary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum

import typer

from roberta_static.errors import Interrupted, RobertaStaticError

Arg = typer.Argument
Opt = typer.Option


def choices(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum, so Typer lists the choices in ``--help`` and rejects others."""
    return Enum(name, {value: value for value in values}, type=str)  # type: ignore[return-value]


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn our errors into ``error: ...`` on stderr and exit status 1; Ctrl-C into status 130."""
    try:
        yield
    except Interrupted as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(130) from None
    except RobertaStaticError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
