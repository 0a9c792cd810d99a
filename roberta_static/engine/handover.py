"""Messages handed from a feeder's threads to the pass loop's, through a bounded queue."""

from __future__ import annotations

import queue
import threading

from .messages import Message

_POLL_SECONDS = 0.1


class FeederClosed(BaseException):  # noqa: N818 (a signal through serve, which catches Exception)
    """The feeder was closed while a thread of it waited to hand over a message."""


def put_unless_closed(target: queue.Queue, message: Message, closed: threading.Event) -> None:
    """Put ``message`` into ``target``, waiting for room; :class:`FeederClosed` once closed."""
    while not closed.is_set():
        try:
            target.put(message, timeout=_POLL_SECONDS)
            return
        except queue.Full:
            continue
    raise FeederClosed
