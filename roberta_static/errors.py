"""Errors raised by roberta-static.

Every error a user can cause derives from :class:`RobertaStaticError`, so the CLI catches one class
and prints one line. Each subclass also inherits the builtin a caller would expect to catch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class RobertaStaticError(Exception):
    """Base class of all errors raised for bad input or configuration.

    Attributes:
        remote_traceback: For an error raised in a worker process or a Ray task, the traceback
            there, as text (tracebacks do not cross processes; this attribute does, pickled with
            the error). ``None`` for an error of this process. With debugging on (see
            :mod:`roberta_static.debug`) it is shown as the error's cause.

    """

    remote_traceback: str | None = None


class ConfigError(RobertaStaticError, ValueError):
    """An option has a value that cannot work.

    Args:
        problem: What is wrong, and what would work.
        field: The option at fault (a ``DistillConfig`` field or a function's argument), when
            there is one: the message then reads ``field: problem``, and the CLI names the flag
            the user typed instead.

    Example:
        >>> str(ConfigError("must be >= 0, got -3", field="max_contexts"))
        'max_contexts: must be >= 0, got -3'

    """

    def __init__(self, problem: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.problem = problem
        self.field = field


def require_minimums(options: object, minimums: Mapping[str, int]) -> None:
    """Raise :class:`ConfigError` for the first attribute of ``options`` below its minimum.

    An attribute that is ``None`` (unset) passes.
    """
    for name, least in minimums.items():
        value = getattr(options, name)
        if value is not None and value < least:
            raise ConfigError(f"must be >= {least}, got {value}", field=name)


class CorpusError(RobertaStaticError, OSError):
    """A corpus path is missing, unreadable or holds no usable text."""


class VocabError(RobertaStaticError, ValueError):
    """The vocabulary file is missing, malformed or empty."""


class ModelLoadError(RobertaStaticError, OSError):
    """The encoder or its tokenizer cannot be loaded."""


class OutputError(RobertaStaticError, OSError):
    """An output cannot be written, or would overwrite something the user made."""


class VectorsError(RobertaStaticError, ValueError):
    """A vectors directory or file is missing or malformed."""


class DatasetError(RobertaStaticError, ValueError):
    """An evaluation dataset is missing or malformed."""


class MissingExtraError(RobertaStaticError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class WorkerError(RobertaStaticError, RuntimeError):
    """A worker process of the pass ended before its work was done (killed, say, for memory)."""


class Interrupted(RobertaStaticError):
    """The run was asked to stop; a checkpoint was written to resume from."""


class RobertaStaticWarning(UserWarning):
    """What a finished run tells its user in Python: entries not found, input skipped.

    Filter it like any warning: ``warnings.simplefilter("ignore", RobertaStaticWarning)``.
    """


class KeyNotFoundError(RobertaStaticError, KeyError):
    """A word or phrase has no vector."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def short_list(items: Sequence[object], shown: int = 10) -> str:
    """The first ``shown`` items and how many more, for a one-line message.

    Example:
        >>> short_list(["a", "b", "c", "d"], shown=2)
        'a, b and 2 more'

    """
    listed = ", ".join(str(item) for item in items[:shown])
    return listed + (f" and {len(items) - shown:,} more" if len(items) > shown else "")


def install_hint(extra: str) -> str:
    """How to add an optional extra: the package installs from its checkout, not from an index.

    Example:
        >>> install_hint("ray")
        'pip install -c constraints.txt ".[ray]" in the roberta-static checkout'

    """
    return f'pip install -c constraints.txt ".[{extra}]" in the roberta-static checkout'
