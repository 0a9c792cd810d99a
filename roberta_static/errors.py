"""Errors raised by roberta-static.

Every error a user can cause derives from :class:`RobertaStaticError`, so the CLI catches one class
and prints one line. Each subclass also inherits the builtin a caller would expect to catch.
"""

from __future__ import annotations

from collections.abc import Sequence


class RobertaStaticError(Exception):
    """Base class of all errors raised for bad input or configuration."""


class ConfigError(RobertaStaticError, ValueError):
    """An option has a value that cannot work."""


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


class Interrupted(RobertaStaticError):
    """The run was asked to stop; a checkpoint was written to resume from."""


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
