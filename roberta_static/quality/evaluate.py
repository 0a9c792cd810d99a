"""Word-similarity (Spearman, Pearson) and analogy evaluation of static vectors.

gensim's bundled SimLex-999 and WordSim-353 are available by name. Pairs with a word that has no
vector are counted and listed, never dropped silently: scores are over the covered pairs and the
coverage is reported beside them. A score over fewer than ``MIN_COVERED`` items (pairs or analogy
questions), or over less than ``MIN_COVERAGE`` percent of its dataset, is flagged ``low_coverage``:
it says little about the vectors, and little about the dataset as a whole.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gensim.models import KeyedVectors
from gensim.test.utils import datapath
from scipy.stats import pearsonr, spearmanr

from ..errors import DatasetError
from ..text.corpus import normalize_text
from ..vectors.static import StaticVectors

BUNDLED_PAIRS = {"simlex999": "simlex999.txt", "wordsim353": "wordsim353.tsv"}
ALIASES = {
    "simlex": "simlex999",
    "simlex-999": "simlex999",
    "ws353": "wordsim353",
    "wordsim": "wordsim353",
}
ANALOGIES = "questions-words.txt"
MIN_COVERED = 50
MIN_COVERAGE = 50.0


def low_coverage(covered: int, total: int) -> bool:
    """Whether ``covered`` of ``total`` items are too few for a score to mean much."""
    return covered < MIN_COVERED or 100.0 * covered < MIN_COVERAGE * total


@dataclass
class PairScores:
    """Correlation of cosine similarities with human scores on one word-pair dataset.

    Attributes:
        dataset: Name or file of the dataset.
        pairs: Pairs in the file.
        covered: Pairs whose two words both have vectors.
        spearman: Spearman rank correlation x 100, over the covered pairs (NaN if fewer than 2).
        pearson: Pearson correlation x 100, over the covered pairs.
        oov_pairs: The pairs left out, in file order.

    """

    dataset: str
    pairs: int
    covered: int
    spearman: float
    pearson: float
    oov_pairs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Covered pairs, percent."""
        return 100.0 * self.covered / self.pairs if self.pairs else 0.0

    @property
    def low_coverage(self) -> bool:
        """Too few covered pairs for the scores to mean much (see :func:`low_coverage`)."""
        return low_coverage(self.covered, self.pairs)


@dataclass
class AnalogyScores:
    """3CosAdd accuracy on analogy questions (gensim's ``evaluate_word_analogies``)."""

    dataset: str
    questions: int
    covered: int
    correct: int

    @property
    def accuracy(self) -> float:
        """Correct answers among covered questions, percent."""
        return 100.0 * self.correct / self.covered if self.covered else 0.0

    @property
    def coverage(self) -> float:
        """Questions whose four words have vectors, percent."""
        return 100.0 * self.covered / self.questions if self.questions else 0.0

    @property
    def low_coverage(self) -> bool:
        """Too few covered questions for the accuracy to mean much (see :func:`low_coverage`)."""
        return low_coverage(self.covered, self.questions)


def dataset_path(name_or_file: str) -> tuple[str, Path]:
    """Resolve a bundled dataset name (``simlex999``, ``wordsim353``) or a file path."""
    key = ALIASES.get(name_or_file.lower(), name_or_file.lower())
    if key in BUNDLED_PAIRS:
        return key, Path(datapath(BUNDLED_PAIRS[key]))
    path = Path(name_or_file)
    if not path.is_file():
        raise DatasetError(
            f"{name_or_file}: no such file, nor a bundled dataset ({', '.join(BUNDLED_PAIRS)})"
        )
    return path.name, path


def read_pairs(path: str | os.PathLike) -> list[tuple[str, str, float]]:
    """Read ``word1<TAB>word2<TAB>score`` lines (whitespace works too).

    The format of gensim's ``evaluate_word_pairs``: blank lines and lines starting with ``#``
    (comments, headers) are skipped. Unlike gensim, which skips a line it cannot read, a line that
    is not two words and a finite score is an error, so no pair is dropped unseen.

    Raises:
        DatasetError: The file cannot be read, a line is malformed (naming it), or no pair is left.

    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot read word pairs ({error})") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            pairs.append(_pair(line, f"{path}:{number}", first=not pairs))
    if not pairs:
        raise DatasetError(f"{path}: no word pairs")
    return pairs


def _pair(line: str, where: str, first: bool) -> tuple[str, str, float]:
    """One line's two words and score; ``where`` names the line in errors."""
    fields = [f.strip() for f in (line.split("\t") if "\t" in line else line.split())]
    if len(fields) != 3 or not (fields[0] and fields[1]):
        found = f"; found {len(fields)} fields" if len(fields) != 3 else ""
        raise DatasetError(f"{where}: expected word1<TAB>word2<TAB>score{found}")
    try:
        score = float(fields[2])
    except ValueError:
        # A header line is a comment in gensim's format: say so where a header would stand.
        hint = "; a header line must start with #" if first else ""
        raise DatasetError(f"{where}: score {fields[2]!r} is not a number{hint}") from None
    if not math.isfinite(score):
        raise DatasetError(f"{where}: score {fields[2]!r} is not a finite number")
    return fields[0], fields[1], score


def find_key(kv: KeyedVectors, word: str, lower: bool) -> str | None:
    """The key of ``word`` in ``kv``, or None.

    Tried as written, in NFC (the form distilled entries have), lower-cased when ``lower``, and for
    phrases in both spellings: with ``_`` between their words (as word2vec exports write them) and
    with spaces (as vectors folders keep them).
    """
    spellings = [word, normalize_text(word)]
    if lower:
        spellings += [spelling.lower() for spelling in spellings]
    for spelling in spellings:
        for key in (spelling, spelling.replace(" ", "_"), spelling.replace("_", " ")):
            if key in kv.key_to_index:
                return key
    return None


def evaluate_pairs(
    kv: KeyedVectors, path: str | os.PathLike, lower: bool, name: str | None = None
) -> PairScores:
    """Score a word-pair file by the cosine similarity of each covered pair.

    Args:
        kv: The vectors.
        path: A word-pair file (see :func:`read_pairs`).
        lower: Look words up lower-cased too (vectors distilled with ``case="lower"``).
        name: Label of the dataset in the result (default: the file name).

    """
    pairs = read_pairs(path)
    similarities, humans, oov = [], [], []
    for first, second, score in pairs:
        keys = find_key(kv, first, lower), find_key(kv, second, lower)
        if None in keys:
            oov.append((first, second))
            continue
        similarities.append(float(kv.similarity(*keys)))
        humans.append(score)
    spearman = pearson = float("nan")
    if len(humans) >= 2 and np.ptp(humans) > 0 and np.ptp(similarities) > 0:
        spearman = 100.0 * float(spearmanr(similarities, humans).statistic)
        pearson = 100.0 * float(pearsonr(similarities, humans).statistic)
    return PairScores(name or Path(path).name, len(pairs), len(humans), spearman, pearson, oov)


def evaluate_analogies(
    kv: KeyedVectors, path: str | os.PathLike | None = None, lower: bool = True
) -> AnalogyScores:
    """3CosAdd accuracy over the whole vocabulary; defaults to gensim's ``questions-words.txt``."""
    path = Path(path) if path is not None else Path(datapath(ANALOGIES))
    lines = path.read_text(encoding="utf-8").splitlines()
    questions = sum(1 for line in lines if line.strip() and not line.startswith(":"))
    _, sections = kv.evaluate_word_analogies(
        str(path), restrict_vocab=len(kv), case_insensitive=lower
    )
    total = next(s for s in sections if s["section"] == "Total accuracy")
    correct = len(total["correct"])
    return AnalogyScores(path.name, questions, correct + len(total["incorrect"]), correct)


def load_for_evaluation(
    path: str | os.PathLike, allow_pickle: bool = False
) -> tuple[KeyedVectors, bool]:
    """Vectors in any format ``StaticVectors.load`` reads; whether to look words up lower-cased."""
    vectors = StaticVectors.load(path, allow_pickle=allow_pickle)
    return vectors.to_keyed_vectors(), vectors.case == "lower"
