"""Run a producer ahead of its consumer in a background thread, through a bounded queue.

The encoder releases the GIL while it computes, so segmentation, matching and tokenization of the
next chunk overlap with the model's work on the current one. One producer keeps the order, so
results do not change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from queue import Empty, Full, Queue
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items`` in order while a thread computes up to ``depth`` of them ahead.

    An exception in the producer is raised in the consumer; when the consumer stops early (or
    raises), the producer stops after the item in hand, without the consumer waiting for it.
    """
    queue: Queue[object] = Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as error:  # handed to the consumer, which raises it
            put(_Failure(error))

    thread = threading.Thread(target=produce, name="roberta-static-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = queue.get(timeout=0.1)
            except Empty:
                if not thread.is_alive() and queue.empty():
                    raise RuntimeError("prefetch producer ended without a result") from None
                continue
            if item is _DONE:
                thread.join()
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        # A consumer that stops early does not wait: the producer's item in hand may take seconds.
        stop.set()
