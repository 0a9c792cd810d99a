"""A command in a child process, measured by ``wait4``: its own CPU seconds and peak memory."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    """How a child ran: its exit code, its output and what it took.

    ``output``: stdout and stderr together. ``cpu``: user + system seconds, those of the children
    it waited for included. ``peak_bytes``: its peak resident memory.
    """

    exit_code: int
    output: str
    wall: float
    cpu: float
    peak_bytes: int


def run_measured(command: list[str], env: dict[str, str] | None = None) -> Finished:
    """Run ``command`` to its end and measure it."""
    started = time.perf_counter()
    # The output goes to a file: a pipe nobody reads until the end would fill and stop the child.
    with tempfile.TemporaryFile() as output:
        child = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        output.seek(0)
        text = output.read().decode(errors="replace")
    return Finished(
        os.waitstatus_to_exitcode(status),
        text,
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss * 1024,  # kB on Linux
    )
