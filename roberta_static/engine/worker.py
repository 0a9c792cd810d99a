"""What a worker process runs: shard tasks served by a producer, their messages sent back.

This module imports neither torch nor spaCy: a spawned worker imports it before it runs
:func:`worker_main`, which may first keep torch out (see there).
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..debug import keep_traceback
from ..errors import CorpusError, RobertaStaticError
from .heap import fix_mmap_threshold
from .messages import CountShard, EncodeShard, Failure, Message, Task

if TYPE_CHECKING:
    from .producer import Producer, ProducerSetup


@dataclass(frozen=True)
class Ready:
    """A worker process's first message: its producer is built, it takes tasks from now on."""

    pid: int


def serve(
    producer: Producer,
    task: Task,
    send: Callable[[Message], Any],
    hand_over: threading.Event | None = None,
) -> Task | None:
    """Run one task, sending its messages: the counts, or each chunk (the last one ``done``).

    Once ``hand_over`` is set, a shard task stops after the chunk in hand and returns the rest of
    the shard as a task for another feeder (it goes on from there as a resumed shard would).
    """
    try:
        if isinstance(task, CountShard):
            send(producer.count(task))
            return None
        taken = task.state.taken
        for chunk in producer.chunks(task):
            send(chunk)
            taken = taken + chunk.taken
            if hand_over is not None and hand_over.is_set() and not chunk.done:
                state = replace(task.state, position=chunk.position, taken=taken, stats=chunk.stats)
                return EncodeShard(task.shard, state, task.allowance)
    except RobertaStaticError as error:
        send(Failure(task.shard, keep_traceback(error, error)))
    except Exception as error:  # noqa: BLE001 (reaches the user as one line)
        send(Failure(task.shard, worker_failure(error)))
    return None


def worker_failure(error: BaseException) -> CorpusError:
    """An unexpected error in the CPU side, as the one-line error the user sees.

    It keeps the traceback of ``error`` here, which ``--debug`` shows (see
    :mod:`roberta_static.debug`).
    """
    return keep_traceback(CorpusError(f"worker failed: {type(error).__name__}: {error}"), error)


def worker_main(setups: Any, tasks: Any, results: Any, without_torch: bool) -> None:
    """A worker process: build the producer once, then run shard tasks until told to end.

    ``without_torch``: the producer needs no torch (spaCy's blank pipeline and sentencizer,
    the ``tokenizers`` library), so none is imported. spaCy's thinc imports torch whenever it is
    installed, a large part of a worker's start-up, which a short run on few cores pays in
    full.
    """
    # Ctrl-C reaches the whole process group; the main process decides how the run stops. It
    # started this process with SIGINT blocked, so one sent meanwhile is dropped here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _end_with_parent()
    if without_torch:
        # Python's documented way to make an import fail: thinc then runs without torch.
        sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
        # Without torch no model runs here, so a fixed threshold costs nothing.
        fix_mmap_threshold()
    # spaCy's imports, while the main process loads the model that the setup needs.
    importlib.import_module(".producer", __package__)
    setup: ProducerSetup = setups.get()
    producer = setup.producer()
    # What this process holds now lives as long as it: full collections need not walk it (see
    # .collector).
    gc.freeze()
    results.put(Ready(os.getpid()))
    while (task := tasks.get()) is not None:
        serve(producer, task, results.put)


def worker_process(setups: Any, tasks: Any, results: Any, without_torch: bool) -> None:
    """A worker process's whole life: :func:`worker_main`, then an exit without teardown.

    A spawned process ends by tearing its interpreter down, spaCy's modules and objects, which the
    end of a run would wait for. Once its messages are flushed, nothing of a worker needs it.
    """
    worker_main(setups, tasks, results, without_torch)
    results.close()
    results.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _end_with_parent() -> None:
    """End this worker as soon as the main process ends, however it ends (a second Ctrl-C)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="roberta-static-parent", daemon=True).start()
