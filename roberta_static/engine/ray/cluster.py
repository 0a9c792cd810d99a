"""The Ray cluster a pass runs on: Ray imported, the cluster joined or started, its errors.

Ray writes its own log lines to the terminal (a warning about token authentication, an
error-level line when an actor's arguments are large, ...) on runs that go well; to a user they
read as failures. They are kept to fatal errors unless debugging is on (``--debug``, see
:mod:`roberta_static.debug`); a run that fails still says why in one line.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from ...config import DistillConfig
from ...debug import debugging
from ...errors import ConfigError, RobertaStaticError, install_hint
from ...stopping import Checkpointing
from ..worker import worker_failure

_CONNECT_SECONDS = 5
# Ray's C++ side reads its log level from the environment when its processes start.
_QUIET_ENVIRONMENT = {"RAY_BACKEND_LOG_LEVEL": "fatal", "RAY_LOG_TO_STDERR": "0"}


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"the Ray engine needs Ray: {install_hint('ray')}", field="engine"
        ) from None
    return ray


def check_cluster(config: DistillConfig) -> Any:
    """Before the model loads: Ray is installed, and ``ray_address`` is one that answers.

    Returns the ``ray`` module. Ray would retry an address nothing answers on for minutes.
    """
    ray = import_ray()
    if config.ray_address is not None and not ray.is_initialized():
        _check_reachable(config.ray_address)
    return ray


def _check_reachable(address: str) -> None:
    """Refuse what is no address Ray takes, and a ``HOST:PORT`` nothing answers on."""
    if address in ("auto", "local") or "://" in address:
        return  # Ray resolves these itself
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"{address!r} is not the address of a Ray cluster: give HOST:PORT (what `ray start "
            "--head` prints), ray://HOST:PORT, auto or local",
            field="ray_address",
        )
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_SECONDS).close()
    except OSError as error:
        raise ConfigError(
            f"nothing answers at {address} ({error.strerror or error}); start the cluster with "
            "`ray start --head` and pass the address it prints, or auto",
            field="ray_address",
        ) from None


@contextmanager
def connected(ray: Any, address: str | None, checkpointing: Checkpointing | None) -> Iterator[None]:
    """Ray as this process is connected to it, or joined (or started) for the run."""
    if ray.is_initialized():
        yield
        return
    # Ray's start-up cut short by a stop leaves its agent processes running: a stop waits for it.
    starting = checkpointing.uninterrupted() if checkpointing is not None else nullcontext()
    verbose = debugging()
    quiet = {} if verbose else _QUIET_ENVIRONMENT
    # A cluster started here starts no idle workers ahead: the shard tasks run in workers of
    # their own (see .tasks), so those would only hold memory.
    local = {"_system_config": {"prestart_worker_first_driver": False}} if address is None else {}
    try:
        with starting, _environment(quiet), nullcontext() if verbose else _stderr_silenced():
            ray.init(
                address=address,
                logging_level=logging.INFO if verbose else logging.ERROR,
                log_to_driver=verbose,
                include_dashboard=False,
                **local,
            )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = address or "a new local cluster"
        raise ConfigError(f"cannot start Ray at {where}: {error}", field="ray_address") from None
    except BaseException:
        ray.shutdown()  # stopped once started, or a second Ctrl-C: leave no Ray process behind
        raise
    try:
        yield
    finally:
        ray.shutdown()


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Discard the process's standard error (the file descriptor, which C++ writes to).

    Ray's C++ side, joining the cluster, logs a line saying which log level it read from the
    environment, whatever the level. A failure to start still reaches the user as the error
    ``ray.init`` raises; the processes Ray starts write to their own log files.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Environment variables set while the block runs (Ray's processes start inside it)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def values(ray: Any, refs: list[Any]) -> list[Any]:
    """The values of ``refs`` (ready ones); a task's error is raised as the error it raised."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as error:
        raise our_error(ray, error) from None


def our_error(ray: Any, error: Exception) -> RobertaStaticError:
    """A Ray error as this package's: a task's own error as it raised it, Ray's as one line."""
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause
        return cause if isinstance(cause, RobertaStaticError) else worker_failure(cause)
    # an actor that cannot start, a lost node
    return ConfigError(f"the Ray cluster failed: {first_line(error)}", field="engine")


def first_line(error: Exception) -> str:
    """The first line of a Ray error's text (the rest is Ray's advice and its traceback)."""
    return str(error).strip().splitlines()[0]
