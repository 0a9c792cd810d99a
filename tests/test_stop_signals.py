"""Ctrl-C and SIGTERM in the commands: a first signal stops the run, a second ends the process."""

from __future__ import annotations

import gc
import signal
import time

import pytest

from roberta_static.cli._util import stop_on_signals
from roberta_static.stopping import Checkpointing, StopNow


class _Run:
    def __init__(self) -> None:
        self.stops = 0

    def request_stop(self) -> None:
        self.stops += 1


def test_after_a_signal_a_second_one_ends_the_process_until_it_exits(capfd):
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    run = _Run()
    try:
        with stop_on_signals(run):
            # Called as the interpreter calls it when Ctrl-C arrives (no real signal is sent).
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        assert run.stops == 1
        assert capfd.readouterr().err == "stopping... (Ctrl-C again to quit now)\n"
        # Even while the command winds down, after the block: not swallowed by a handler.
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        gc.unfreeze()


def test_a_stop_says_so_while_the_ray_engine_discards_the_process_s_standard_error(capfd):
    from roberta_static.engine.ray.cluster import _stderr_silenced

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with stop_on_signals(_Run()), _stderr_silenced():  # as while Ray starts
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        assert capfd.readouterr().err == "stopping... (Ctrl-C again to quit now)\n"
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        gc.unfreeze()


def test_a_run_never_stopped_gets_the_previous_handlers_back():
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with stop_on_signals(_Run()):
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
    assert {signum: signal.getsignal(signum) for signum in before} == before


def test_a_signal_that_comes_inside_a_finalizer_still_stops_the_run_at_once(tmp_path, capfd):
    # Python prints and drops an exception raised in a __del__: a Ctrl-C that came while a
    # collection ran one (as one does while a model loads) did not stop the run there.
    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # its handler runs here, in this frame

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(StopNow), stop_on_signals(Checkpointing(tmp_path)):
            Finalized()
            for _ in range(500):  # ordinary code, where the stop lands
                time.sleep(0.01)
        assert capfd.readouterr().err == "stopping... (Ctrl-C again to quit now)\n"
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        gc.unfreeze()
