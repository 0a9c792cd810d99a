"""Memory of spaCy's tokenizer cache: a process's growth over new words, per cache bound.

Tokenizes ``--words`` distinct random words (4-12 letters, some with a trailing comma, period or
"'s") in a fresh process per bound, and prints how much the process grew. The difference between
the bounds is what the cache itself costs; the rest is the vocabulary's new lexemes and strings,
which every bound pays.

Usage: python benchmarks/experiments/tokenizer_cache.py [--words 200000]
"""

from __future__ import annotations

import argparse
import random
import string
import subprocess
import sys

from roberta_static.text.segment import TOKENIZER_CACHE_CHUNKS, load_segmenter


def grown_mb(words: int, cache_size: int) -> float:
    """Resident memory the tokenizer added in a fresh process (VmRSS after minus before)."""
    nlp = load_segmenter("en")
    nlp.tokenizer.max_cache_size = cache_size
    rng = random.Random(0)
    letters = string.ascii_lowercase
    chunks = [
        "".join(rng.choices(letters, k=rng.randint(4, 12))) + rng.choice(["", ",", ".", "'s"])
        for _ in range(words)
    ]
    before = _rss_kb()
    for start in range(0, words, 1000):
        nlp.tokenizer(" ".join(chunks[start : start + 1000]))
    return (_rss_kb() - before) / 1024


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.measure is not None:
        print(grown_mb(args.words, args.measure))
        return
    grown = {}
    for bound in (10_000, TOKENIZER_CACHE_CHUNKS):
        command = [sys.executable, __file__, "--words", str(args.words), "--measure", str(bound)]
        grown[bound] = float(subprocess.run(command, capture_output=True, text=True).stdout)
        print(
            f"cache bound {bound:>9,}: {grown[bound]:6.1f} MB grown over {args.words:,} new words"
        )
    cached = min(args.words, TOKENIZER_CACHE_CHUNKS) - 10_000
    extra = grown[TOKENIZER_CACHE_CHUNKS] - grown[10_000]
    print(f"the cache: about {extra * 2**20 / cached:,.0f} bytes per cached chunk")


if __name__ == "__main__":
    main()
