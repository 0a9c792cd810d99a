"""Peak memory of `distill` on a corpus that is one huge line without a newline.

Builds files of one line each (gensim's Wikipedia + Lee text repeated, joined by spaces, no newline)
of the sizes asked for, and runs ``roberta-static distill`` on each in a fresh process with three
vocabulary words that occur once per copy of the text, so segmentation of the whole line is the
work and few sentences reach the encoder. Peak RSS comes from ``wait4`` on the child
(``child_run.py``). Bounded memory means the peak stays flat as the line grows. The encoder's
working memory for one batch grows with ``--batch-tokens`` (attention is heads x rows x
length^2); a small budget keeps that part equal across sizes, so what is left to compare is the
corpus path.

Usage: python benchmarks/long_line.py [--sizes-mb 5,25,50] [--batch-tokens 1024] [--model PATH]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from child_run import run_measured
from gensim_corpus import lee_documents, wiki_paragraphs
from quality import minilm_path


def write_one_line(path: Path, text: str, size: int) -> None:
    """``text`` repeated, space-joined, up to ``size`` bytes, no newline anywhere."""
    block = (text + " ").encode()
    with open(path, "wb") as handle:
        written = 0
        while written < size:
            part = block[: size - written]
            handle.write(part)
            written += len(part)


def rare_words(text: str, n: int = 3) -> list[str]:
    """Alphabetic words of at least 8 letters that occur exactly once in ``text``."""
    counts = Counter(word.lower() for word in text.split())
    return sorted(w for w, c in counts.items() if c == 1 and w.isalpha() and len(w) >= 8)[:n]


def run_distill(
    corpus: Path, vocab: Path, model: str, out: Path, batch_tokens: int
) -> tuple[float, float, str]:
    """Seconds, peak RSS in MB, and the last line the CLI printed."""
    finished = run_measured(
        ["roberta-static", "distill", str(corpus), "--vocab", str(vocab), "--model", model,
         "--out", str(out), "--max-contexts", "0", "--layers", "-1",
         "--batch-tokens", str(batch_tokens)]
    )  # fmt: skip
    if finished.exit_code != 0:
        raise SystemExit(f"distill failed on {corpus}:\n{finished.output}")
    lines = [line for line in finished.output.splitlines() if "entries found" in line]
    return finished.wall, finished.peak_bytes / 2**20, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="5,25,50")
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    model = args.model or str(minilm_path())
    text = " ".join([*wiki_paragraphs(), *lee_documents()])
    words = rare_words(text)
    print(
        f"one-line corpora of {args.sizes_mb} MB; vocabulary: {', '.join(words)}; "
        f"--batch-tokens {args.batch_tokens}; model {model}"
    )
    with tempfile.TemporaryDirectory() as folder:
        vocab = Path(folder) / "vocab.txt"
        vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
        for size_mb in (float(s) for s in args.sizes_mb.split(",")):
            corpus = Path(folder) / f"line-{size_mb:g}MB.txt"
            write_one_line(corpus, text, int(size_mb * 1e6))
            out = Path(folder) / "out"
            seconds, peak_mb, summary = run_distill(corpus, vocab, model, out, args.batch_tokens)
            print(f"{size_mb:g} MB line: peak RSS {peak_mb:,.0f} MB, {seconds:.1f} s; {summary}")
            corpus.unlink()
            shutil.rmtree(Path(folder) / "out")


if __name__ == "__main__":
    main()
