"""Ctrl-C and SIGTERM in the commands: a first signal stops the run, a second ends the process."""

from __future__ import annotations

import gc
import signal

from roberta_static.cli._util import stop_on_signals


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


def test_a_run_never_stopped_gets_the_previous_handlers_back():
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with stop_on_signals(_Run()):
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
    assert {signum: signal.getsignal(signum) for signum in before} == before
