"""Stop times of ``distill``: Ctrl-C in a terminal and ``kill -INT``, until the process has ended.

Each run starts ``roberta-static distill`` in a pseudo-terminal, as a user's shell would, lets it
encode for ``--after`` seconds (default 20) once its bar shows tokens encoded, then stops it the
way a user does:

- ``ctrl-c``: the terminal's Ctrl-C (byte 0x03), which sends SIGINT to the whole foreground
  process group (worker processes included);
- ``kill``: ``kill -INT PID``, to the main process alone.

It times, from that signal, ``stopping...`` printed, ``stopped; ...`` printed (the checkpoint is
saved) and the process's end, with its exit status and whether its output holds a traceback;
then it resumes the run until it encodes again and prints the resumed bar's first line (where it
starts). ``--twice`` sends a second signal once ``stopped; ...`` is printed, while the process
winds down, and times the end from that second signal. ``--ray`` adds runs with ``--engine ray
--workers 2`` (a local cluster that the run starts).

Input: gensim's lee_background.cor repeated ``--repeat`` times (583: 210 MB), the SimLex-999 +
WordSim-353 vocabulary, the offline all-MiniLM-L6-v2 on CPU, ``--max-contexts 0`` (so the run
never ends early).

Usage: python benchmarks/stopping.py [--workers 1,2] [--ray] [--how ctrl-c,kill] [--tries 3]
       [--repeat 583] [--after 20] [--twice] [--keep]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import shutil
import signal
import struct
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from extras import needs, packaged_model
from gensim.test.utils import datapath
from quality import dataset_words
from throughput import hardware

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TOKENS = re.compile(r"([\d,]+) tok/s")


@dataclass
class Terminal:
    """A command in a pseudo-terminal, its output gathered with the time each piece came."""

    argv: list[str]
    output: bytearray = field(default_factory=bytearray)
    changed: threading.Condition = field(default_factory=threading.Condition)
    closed: bool = False

    def start(self) -> None:
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: a session leader whose terminal is the pty
            os.execvp(self.argv[0], self.argv)
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.started = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the child closed the terminal
                data = b""
            with self.changed:
                self.output += data
                self.closed = not data
                self.changed.notify_all()
            if not data:
                return

    def text(self) -> str:
        return _ANSI.sub("", self.output.decode("utf-8", "replace")).replace("\r", "\n")

    def wait_for(self, found: Callable[[str], bool], timeout: float) -> float:
        """Wait until ``found(text)``; the time it took, from now."""
        start = time.monotonic()
        with self.changed:
            while not found(self.text()):
                if self.closed or time.monotonic() - start > timeout:
                    raise TimeoutError(self.text()[-2000:])
                self.changed.wait(0.05)
        return time.monotonic() - start

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def encoding(text: str) -> bool:
    return any(int(rate.replace(",", "")) > 0 for rate in _TOKENS.findall(text))


def stop_once(argv: list[str], how: str, twice: bool, after: float) -> dict:
    """Run ``argv`` until ``after`` seconds into encoding, stop it ``how``; what happened, timed
    from the signal."""
    run = Terminal(argv)
    run.start()
    run.wait_for(encoding, timeout=900)
    time.sleep(after)
    before = len(run.text())
    signalled = time.monotonic()
    send = run.ctrl_c if how == "ctrl-c" else lambda: os.kill(run.pid, signal.SIGINT)
    send()
    said = run.wait_for(lambda text: "stopping..." in text[before:], timeout=60)
    saved = time.monotonic() - signalled
    saved += run.wait_for(lambda text: "stopped" in text[before:], timeout=600)
    if twice:
        signalled = time.monotonic()
        send()
    code = run.wait()
    ended = time.monotonic() - signalled
    text = run.text()
    return {
        "said": said,
        "saved": saved,
        "ended": ended,
        "exit": code,
        "traceback": "Traceback" in text or bool(re.search(r"[A-Z]\w*Error: ", text)),
        "text": text,
    }


def resumed_bar(command: str, out: Path, how: str) -> str:
    """Resume the run stopped in ``out`` until it encodes again: its first progress bar."""
    if not (out / ".checkpoint").exists():
        return "no checkpoint"
    resumed = stop_once([command, "distill", "--resume", str(out)], how, False, 0)
    bars = [line.strip() for line in resumed["text"].splitlines() if "distilling" in line]
    return f"resumed: exit {resumed['exit']}, first bar {bars[0] if bars else None!r}"


def check_installed(with_ray: bool) -> None:
    """What the runs need, said before any work: the offline MiniLM (-m minilm), Ray for --ray."""
    packaged_model("minilm")
    if with_ray:
        with needs("ray", instead="or leave out --ray"):
            import ray  # noqa: F401


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--ray", action="store_true")
    parser.add_argument("--how", default="ctrl-c,kill")
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=583)
    parser.add_argument("--twice", action="store_true")
    parser.add_argument("--after", type=float, default=20, help="seconds of encoding first")
    parser.add_argument("--keep", action="store_true", help="print each run's output")
    args = parser.parse_args()
    check_installed(args.ray)
    print(hardware())
    folder = Path(tempfile.mkdtemp(prefix="stopping-"))
    try:
        corpus = folder / "lee.txt"
        lee = Path(datapath("lee_background.cor")).read_bytes()
        with open(corpus, "wb") as handle:
            for _ in range(args.repeat):
                handle.write(lee)
        vocab = folder / "vocab.txt"
        vocab.write_text("\n".join(dataset_words()) + "\n")
        command = shutil.which("roberta-static") or sys.exit("roberta-static is not on PATH")
        print(f"corpus {corpus.stat().st_size / 1e6:.1f} MB, {len(dataset_words())} words")
        setups = [(f"workers {n}", ["--workers", n]) for n in args.workers.split(",") if n]
        if args.ray:
            setups.append(("ray, 2 workers", ["--engine", "ray", "--workers", "2"]))
        for number, (name, options) in enumerate(setups):
            for how in args.how.split(","):
                for attempt in range(1, args.tries + 1):
                    out = folder / f"out-{number}-{how}-{attempt}"
                    argv = [
                        command, "distill", str(corpus), "--vocab", str(vocab), "-m", "minilm",
                        "-o", str(out), "--max-contexts", "0", *options,
                    ]  # fmt: skip
                    result = stop_once(argv, how, args.twice, args.after)
                    print(
                        f"{name}, {how:6} #{attempt}: stopping... after {result['said']:.2f} s, "
                        f"stopped; after {result['saved']:.1f} s, ended after "
                        f"{result['ended']:.1f} s, exit {result['exit']}, traceback "
                        f"{result['traceback']}; {resumed_bar(command, out, how)}"
                    )
                    if args.keep or result["traceback"]:
                        print(result["text"][-3000:])
                    shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
