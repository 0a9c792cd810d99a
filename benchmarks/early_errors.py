"""Seconds until `roberta-static distill` reports each input error that needs no model.

Every such error is found before torch, transformers or a spaCy pipeline loads (the order is
tested in tests/test_cli_options.py); this prints how long each takes, the command's own start-up
(`roberta-static --version`) for comparison, from the start of the process to its exit.

Inputs are made in a temporary folder: a cut-short .gz, .bz2 and .xz of the Wikipedia excerpt
gensim ships (repeated to --megabytes of text), a binary file, a missing, a binary and an empty
vocabulary, and `--lang klingon`. The model named is never loaded (`--model minilm`).

Usage: python benchmarks/early_errors.py [--repeat 5] [--megabytes 20]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gensim.test.utils import datapath


def cases(folder: Path, megabytes: int) -> dict[str, list[str]]:
    text = Path(datapath("lee_background.cor")).read_bytes()
    text = text * (megabytes * 1_000_000 // len(text) + 1)
    good = folder / "good.txt"
    good.write_bytes(text[:100_000])
    for suffix, compress in (
        (".gz", gzip.compress),
        (".bz2", bz2.compress),
        (".xz", lzma.compress),
    ):
        data = compress(text)
        (folder / f"cut.txt{suffix}").write_bytes(data[: len(data) * 9 // 10])
    (folder / "data.bin").write_bytes(b"\x00\x01binary" * 1000)
    (folder / "binary_vocab.txt").write_bytes(b"cat\n\x00dog\n")
    (folder / "empty_vocab.txt").write_bytes(b"\n\n")
    (folder / "vocab.txt").write_text("cat\ndog\n")
    out = ["-m", "minilm", "-o", str(folder / "out")]
    vocab = [str(good), *out, "--vocab"]
    return {
        "start-up (--version)": ["--version"],
        f"cut .gz ({megabytes} MB of text)": [str(folder / "cut.txt.gz"), *out],
        f"cut .bz2 ({megabytes} MB of text)": [str(folder / "cut.txt.bz2"), *out],
        f"cut .xz ({megabytes} MB of text)": [str(folder / "cut.txt.xz"), *out],
        "binary corpus": [str(folder / "data.bin"), *out],
        "--lang klingon": [str(good), *out, "--lang", "klingon"],
        "missing vocabulary": [*vocab, str(folder / "nope.txt")],
        "binary vocabulary": [*vocab, str(folder / "binary_vocab.txt")],
        "empty vocabulary": [*vocab, str(folder / "empty_vocab.txt")],
    }


def seconds(args: list[str]) -> tuple[float, str]:
    command = ["roberta-static"] + ([] if args == ["--version"] else ["distill"]) + args
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    return took, (result.stderr or result.stdout).strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=20)
    args = parser.parse_args()
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        platform.processor(),
    )
    print(f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in cases(Path(tmp), args.megabytes).items():
            runs = [seconds(command) for _ in range(args.repeat)]
            median = statistics.median(took for took, _ in runs)
            print(f"{name:32} {median:5.2f} s (median of {args.repeat})   {runs[0][1][:70]}")


if __name__ == "__main__":
    main()
