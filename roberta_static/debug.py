"""What a one-line error leaves out: ``ROBERTA_STATIC_DEBUG`` and the ``roberta_static`` logger.

Errors reach users as one line (the command line) or as one exception whose causes are hidden
(most are raised ``from None``). With debugging on (``ROBERTA_STATIC_DEBUG=1`` in the environment,
or the command line's ``--debug``), an error keeps its whole story: the errors it was raised
from, and the traceback in the worker process or Ray task where it was raised; and the
``roberta_static`` logger, which says what a run is doing, prints to stderr.

Example:
    >>> import os
    >>> os.environ["ROBERTA_STATIC_DEBUG"] = "1"  # doctest: +SKIP
    >>> vecs = distill(texts=texts, vocab=["cat"], config=config)  # doctest: +SKIP

"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import RobertaStaticError

DEBUG_VARIABLE = "ROBERTA_STATIC_DEBUG"
_TRUE = ("1", "true", "yes", "on")
logger = logging.getLogger("roberta_static")
Function = TypeVar("Function", bound=Callable[..., Any])


class _Switch:
    """Debugging switched on in this process by the command line (``--debug``)."""

    on = False
    handler: logging.Handler | None = None


def debugging() -> bool:
    """Whether debugging is on: ``--debug``, or ``ROBERTA_STATIC_DEBUG`` set to 1 (or true)."""
    return _Switch.on or os.environ.get(DEBUG_VARIABLE, "").strip().lower() in _TRUE


def set_debugging(on: bool) -> None:
    """Switch debugging on or off in this process (what ``--debug`` does), and the log with it."""
    _Switch.on = on
    show_log(debugging())


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to ``sys.stderr`` as it is at each record (a test may swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def show_log(on: bool) -> None:
    """Print the ``roberta_static`` log (every level) on stderr, or stop printing it."""
    if on and _Switch.handler is None:
        _Switch.handler = _Stderr()
        _Switch.handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
        logger.addHandler(_Switch.handler)
        logger.setLevel(logging.DEBUG)
    elif not on and _Switch.handler is not None:
        logger.removeHandler(_Switch.handler)
        logger.setLevel(logging.NOTSET)
        _Switch.handler = None


class RemoteTraceback(Exception):
    """The traceback of an error in another process, shown as the cause of the error it became.

    ``concurrent.futures`` shows a worker's traceback the same way.
    """

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def keep_traceback(error: RobertaStaticError, raised: BaseException) -> RobertaStaticError:
    """Keep on ``error`` the traceback of ``raised`` in this process, as text, and return it.

    For an error about to leave a worker process or a Ray task: the text crosses the process
    boundary with ``error`` (see :attr:`RobertaStaticError.remote_traceback`). An error that
    already carries one keeps it: that is where it was first raised.
    """
    if error.remote_traceback is None:
        where = f"raised in process {os.getpid()} on {socket.gethostname()}"
        error.remote_traceback = f"{where}:\n" + "".join(traceback.format_exception(raised))
    return error


def whole_story(error: BaseException) -> BaseException:
    """``error``, changed in place so that its traceback shows what its one line leaves out.

    The errors it was raised from (which ``raise ... from None`` hides) are shown again, and an
    error from a worker process or a Ray task gets that traceback as its cause.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__suppress_context__ = False
        remote = getattr(current, "remote_traceback", None)
        if remote and current.__cause__ is None:
            # Shown as the cause, after what this process did before (its hidden context).
            current.__cause__ = RemoteTraceback(remote)
            current.__cause__.__context__ = current.__context__
        current = current.__cause__ or current.__context__
    return error


def format_story(error: BaseException) -> str:
    """The full traceback of ``error`` (see :func:`whole_story`), as text."""
    return "".join(traceback.format_exception(whole_story(error)))


def tells_all(function: Function) -> Function:
    """``function``, whose errors are logged, and keep their whole story when debugging."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except RobertaStaticError as error:
            logger.error("%s failed: %s", function.__name__, error)
            if debugging():
                whole_story(error)
            raise

    return wrapper  # type: ignore[return-value]
