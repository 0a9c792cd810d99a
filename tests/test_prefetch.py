from __future__ import annotations

import threading

import pytest

from roberta_static.engine.prefetch import prefetch


def test_keeps_order_and_runs_ahead_in_another_thread():
    producers = set()

    def items():
        for i in range(50):
            producers.add(threading.current_thread().name)
            yield i

    assert list(prefetch(items(), depth=3)) == list(range(50))
    assert producers == {"roberta-static-prefetch"}


def test_producer_error_reaches_the_consumer():
    def items():
        yield 1
        raise ValueError("bad chunk")

    stream = prefetch(items())
    assert next(stream) == 1
    with pytest.raises(ValueError, match="bad chunk"):
        next(stream)


def test_consumer_stopping_early_stops_the_producer():
    produced = []

    def items():
        for i in range(10_000):
            produced.append(i)
            yield i

    stream = prefetch(items(), depth=2)
    assert next(stream) == 0
    stream.close()
    _wait_for_producer_to_end()
    assert len(produced) <= 5


def test_a_consumer_stopping_early_does_not_wait_for_the_item_in_hand():
    release = threading.Event()

    def items():
        yield 0
        release.wait(30)  # an item that takes long to make
        yield 1

    stream = prefetch(items())
    assert next(stream) == 0
    stream.close()  # returns while the producer is still making its item
    assert _producers(), "the consumer waited for the producer"
    release.set()
    _wait_for_producer_to_end()


def _producers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "roberta-static-prefetch"]


def _wait_for_producer_to_end() -> None:
    for thread in _producers():
        thread.join(timeout=10)
    assert not _producers()
