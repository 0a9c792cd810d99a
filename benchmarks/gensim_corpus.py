"""Real English text shipped inside gensim's test data, cleaned into one paragraph per line.

Sources (both ship in ``gensim/test/test_data``):
- ``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``: an excerpt of an English
  Wikipedia dump (text under CC BY-SA), cleaned with gensim's ``extract_pages`` and ``filter_wiki``;
- ``lee_background.cor``: the Lee news corpus background documents, one document per line.

Rebuild the example: ``python benchmarks/gensim_corpus.py examples/wiki.txt --paragraphs 400``.
"""

from __future__ import annotations

import argparse
import bz2
import re
from collections.abc import Iterator
from pathlib import Path

from gensim.corpora.wikicorpus import extract_pages, filter_wiki
from gensim.test.utils import datapath

WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_PROSE = re.compile(r"^[A-Z][^|=*{}\[\]<>]{120,}[.!?]$")


def wiki_paragraphs() -> Iterator[str]:
    """Prose paragraphs of the Wikipedia excerpt: no headings, lists, tables or leftover markup."""
    with bz2.BZ2File(datapath(WIKI_DUMP)) as dump:
        for _title, text, _pageid in extract_pages(dump):
            for line in filter_wiki(text).splitlines():
                line = " ".join(line.replace("'''", "").replace("''", "").split())
                if _PROSE.match(line):
                    yield line


def lee_documents() -> Iterator[str]:
    """The documents of ``lee_background.cor``, one per line."""
    with open(datapath("lee_background.cor"), encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield " ".join(line.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--paragraphs", type=int, default=0, help="Wikipedia paragraphs (0 = all)")
    parser.add_argument("--lee", action="store_true", help="Append the Lee background documents")
    args = parser.parse_args()
    lines = list(wiki_paragraphs())
    if args.paragraphs:
        lines = lines[: args.paragraphs]
    if args.lee:
        lines += list(lee_documents())
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} lines, {args.out.stat().st_size:,} bytes to {args.out}")


if __name__ == "__main__":
    main()
