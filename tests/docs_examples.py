"""What the tests of README's and the site's code blocks share: the blocks, and the files they name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roberta_static.formats.exports import export
from roberta_static.vectors.static import StaticVectors

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^#+ (.+)$", re.M)


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page, the heading above it, its language and its code."""

    page: str
    heading: str
    language: str
    code: str


def code_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a Markdown file, in order, with the heading it sits under."""
    text = path.read_text(encoding="utf-8")
    page = path.relative_to(ROOT).as_posix()
    # Headings are found outside the blocks: a shell comment is no heading.
    prose = _FENCE.sub(lambda block: re.sub(r"[^\n]", " ", block[0]), text)
    blocks = []
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(prose[: match.start()])
        blocks.append(Block(page, headings[-1] if headings else "", match[1], match[2]))
    return blocks


def python_under(path: Path, heading: str) -> str:
    """The first Python block under ``heading`` (any level) of a Markdown file."""
    for block in code_blocks(path):
        if block.heading == heading and block.language == "python":
            return block.code
    raise AssertionError(f"{path.name}: no Python block under {heading!r}")


def example_words(extra: tuple[str, ...] = ()) -> list[str]:
    """The example vocabulary (``examples/vocab.txt``), and ``extra`` entries."""
    words = [w for w in (ROOT / "examples" / "vocab.txt").read_text().splitlines() if w]
    return words + [w for w in extra if w not in words]


def example_vectors(folder: Path, formats: tuple[str, ...] = (), words: list[str] | None = None):
    """Random vectors with distinct counts saved in ``folder``, as ``distill`` would, with exports."""
    words = words or example_words()
    matrix = np.random.default_rng(0).normal(size=(len(words), 16))
    vectors = StaticVectors(words, matrix, np.arange(len(words)) * 3 + 1)
    vectors.save(folder)
    if formats:
        export(folder, list(formats))
    return vectors
