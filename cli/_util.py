"""Shared pieces of the commands: option helpers and the one-line error boundary."""

from __future__ import annotations

import _thread
import gc
import os
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import typer
from typer.core import TyperCommand, TyperGroup

from roberta_static.debug import debugging, format_story
from roberta_static.errors import ConfigError, Interrupted, RobertaStaticError

try:  # recent typer carries its own copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # older typer uses the click package
    from click import ClickException, UsageError

Arg = typer.Argument
Opt = typer.Option


def Flag(*names: str, help: str, **settings: Any) -> Any:  # noqa: N802 (like Arg and Opt)
    """An on/off option: nothing follows it on the command line, so ``--help`` shows no type."""
    return Opt(False, *names, help=help, metavar="", **settings)


def choices(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum, so Typer lists the choices in ``--help`` and rejects others."""
    return Enum(name, {value: value for value in values}, type=str)  # type: ignore[return-value]


def flag(option: str) -> str:
    """The flag of a library option on the command line (Typer's spelling of a parameter name)."""
    return "--" + option.replace("_", "-")


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn our errors into ``error: ...`` on stderr and exit status 1; Ctrl-C into status 130.

    An option named by a :class:`ConfigError` is shown as the flag the user typed. With
    ``--debug`` the error's full traceback comes first, a worker's or a Ray task's included.
    A warning of the library is one line on stderr too: ``warning: ...``.
    """
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            yield
    except Interrupted as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(130) from None
    except RobertaStaticError as error:
        if debugging():
            typer.echo(format_story(error), err=True, nl=False)
        typer.echo(f"error: {_one_line(error)}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None


def _one_line(error: RobertaStaticError) -> str:
    """The error's message, naming the option at fault as the flag the user typed."""
    if isinstance(error, ConfigError) and error.field:
        return f"{flag(error.field)}: {error.problem}"
    return str(error)


def _one_line_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    typer.echo(f"warning: {message}", err=True)


@contextmanager
def command_line_checks() -> Iterator[None]:
    """Checks of the command line alone: what fails here is a usage error, exit status 2.

    Inside, a :class:`ConfigError` (an option value that cannot work, options that do not go
    together, an input left out) is a malformed command line, as Typer's own checks (a count
    below its minimum) make one. Checks that read files, a model or a device come after these
    and exit with status 1.
    """
    try:
        yield
    except ConfigError as error:
        if debugging():
            typer.echo(format_story(error), err=True, nl=False)
        raise UsageError(_one_line(error)) from None


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Typer's own usage errors (a value out of range, a missing argument) as one line too."""
    try:
        yield
    except ClickException as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # Typer prints the help for it
            raise
        typer.echo(f"error: {error.format_message()}", err=True)
        raise typer.Exit(error.exit_code) from None


class _FlagHelp:
    """``--help`` is a flag like ours: listed without Typer's ``<bool>`` type."""

    def get_help_option(self, ctx: Any) -> Any:
        """Typer's help option, shown without a type."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Command(_FlagHelp, TyperCommand):
    """One ``roberta-static`` command; keeps its raw arguments for :func:`check_not_flag_values`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Parse the command's options and arguments; an empty path is a usage error."""
        ctx.meta[_RAW_ARGS] = list(args)
        rest = super().parse_args(ctx, args)  # which takes the arguments it reads out of args
        empty = _empty_path(self.params, ctx.params, ctx.meta[_RAW_ARGS])
        if empty is not None:
            raise UsageError(f"{empty} is empty; give a path")
        return rest


def _empty_path(params: list[Any], values: dict[str, Any], args: list[str]) -> str | None:
    """The option or argument given ``""`` for a path, if any (Typer reads it as ``.``)."""
    typed_for = _given_empty(params, args)
    for param in params if typed_for else []:
        value = values.get(param.name)
        given = value if isinstance(value, (list, tuple)) else [value]
        if not any(isinstance(each, Path) and str(each) == "." for each in given):
            continue
        options = [name for name in param.opts if name.startswith("-")]
        if set(options) & typed_for:
            return max(options, key=len)
        if not options and "" in typed_for:
            return (param.metavar or param.name).upper()
    return None


def _given_empty(params: list[Any], args: list[str]) -> set[str]:
    """The options given ``""`` as typed (``-o``), and ``""`` if an argument was."""
    flags = {name for param in params if getattr(param, "is_flag", False) for name in param.opts}
    typed_for = set()
    for index, arg in enumerate(args):
        before = args[index - 1] if index else ""
        if arg == "":
            typed_for.add(before if before.startswith("-") and before not in flags else "")
        elif arg.startswith("--") and arg.endswith("="):
            typed_for.add(arg[:-1])
    return typed_for


_RAW_ARGS = "roberta_static.raw_args"
_FLAG_VALUES = {"true", "false", "yes", "no", "on", "off"}
_RETRY_SECONDS = 0.01  # a signal that came inside a finalizer is taken again this much later


def check_not_flag_values(ctx: Any, paths: list[Path]) -> None:
    """``--center true``: a flag takes no value, so Typer reads ``true`` as a path; say so."""
    args = ctx.meta.get(_RAW_ARGS, [])
    for path in paths:
        text = str(path)
        if text.lower() not in _FLAG_VALUES or path.exists() or text not in args:
            continue
        before = args[args.index(text) - 1] if args.index(text) > 0 else ""
        if before.startswith("-"):
            raise ConfigError(f"{before} takes no value: write {before}, not {before} {text}")


class CommandGroup(_FlagHelp, TyperGroup):
    """The ``roberta-static`` group: usage errors of the group and its commands are one line."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Parse the group's own options."""
        with one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        """Find the command, parse its options and run it."""
        with one_line_usage_errors():
            return super().invoke(ctx)


class Stoppable(Protocol):
    """What a long run gives :func:`stop_on_signals`: distill's and finetune's stop objects."""

    def request_stop(self) -> None: ...


@contextmanager
def stop_on_signals(checkpointing: Stoppable) -> Iterator[None]:
    """Ctrl-C or SIGTERM: say so at once, stop at the next point a checkpoint can keep, exit 130.

    A second signal ends the process at once, until it has exited: once a signal came, the
    default actions stay (the previous handlers come back only after a run that was never
    stopped), so a second Ctrl-C while the process winds down is not swallowed there.
    """
    signals = (signal.SIGINT, signal.SIGTERM)
    signalled = False

    def handler(signum: int, frame: object) -> None:
        nonlocal signalled
        signalled = True
        for each in signals:
            signal.signal(each, signal.SIG_DFL)
        # os.write, not print: the main thread may be inside a print when the signal arrives.
        os.write(terminal, b"stopping... (Ctrl-C again to quit now)\n")
        checkpointing.request_stop()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # The standard error the run began with: the Ray engine discards the process's own while
    # Ray starts (Ray's C++ side writes there), and a stop then must still say so at once.
    terminal = os.dup(2)
    previous = {signum: signal.getsignal(signum) for signum in signals}
    for signum in signals:
        signal.signal(signum, _outside_finalizers(handler))
    try:
        yield
    finally:
        os.close(terminal)
        if signalled:
            # The process ends now. Its objects need no last collection: with torch, spaCy and
            # a model loaded, Python's final sweep of them takes a second or more.
            gc.freeze()
        else:
            for signum, earlier in previous.items():
                signal.signal(signum, earlier)


def _outside_finalizers(handler: Callable[[int, Any], None]) -> Callable[[int, Any], None]:
    """``handler``, for a signal that comes outside a ``__del__``; inside, taken again later.

    Python prints and drops what a ``__del__`` raises, so a ``StopNow`` raised there would
    be lost (a collection runs finalizers while a model or tokenizer loads).
    """

    def outside(signum: int, frame: FrameType | None) -> None:
        if _in_finalizer(frame):
            threading.Timer(_RETRY_SECONDS, _thread.interrupt_main, (signum,)).start()
        else:
            handler(signum, frame)

    return outside


def _in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a ``__del__`` (its own code or something it calls)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def require_inputs(command: str, inputs: dict[str, Any], instead: str) -> None:
    """Refuse, naming them, the required inputs left out or given empty (``-m ""``), if any.

    See :func:`command_line_checks`.

    Args:
        command: The command, for the message.
        inputs: Each input as the user writes it (``CORPUS``, ``--out``) and its value.
        instead: What may replace them all (``--resume OUT``).

    """
    missing = [name for name, value in inputs.items() if value is None or value == []]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigError(
            f"{command} needs {_and(list(inputs))} (or {instead}); {_and(missing)} {verb} missing"
        )
    empty = [name for name, value in inputs.items() if value == ""]
    if empty:
        raise ConfigError(f"{_and(empty)} {'is' if len(empty) == 1 else 'are'} empty; give a value")


def _and(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " * (len(names) > 1) + names[-1]


def typed_by_user(ctx: typer.Context, name: str) -> bool:
    """Whether the user gave this option (rather than Typer filling in its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
