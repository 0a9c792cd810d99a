"""More ways to fill the unseen entries, drawing on the corpus beyond the entries' own contexts.

Same corpus, vocabulary, encoder and held-out split as ``fill_variants.py``:

- **Map fitted on corpus words too**: the ridge map of ``--fill-unseen mapped``, fitted on the seen
  entries plus every other word the corpus shows at least :data:`MIN_COUNT` times (each
  context-averaged over up to :data:`WORD_CONTEXTS` occurrences): ten times the fitting data.
- **Borrowed contexts**: each unseen entry put, in place of the original word, into the corpus
  sentences of the :data:`DONORS` corpus words nearest to it in the decontextualized space
  (the first :data:`DONOR_SENTENCES` sentences of each; a donor is a word the corpus shows in at
  least that many). The fill is the average over those sentences, made the way seen entries'
  vectors are, not a mapped one. Its held-out entries are corpus words, whose donors lie nearer
  than an unseen entry's: the script prints how much nearer.
- **Rare entries lean on the map**: every seen entry's context average ``c`` over ``n`` contexts
  becomes ``(n c + k m) / (n + k)``, ``m`` its mapped decontextualized vector (cross-fitted, 10
  folds), the unseen ones ``m``. ``k`` comes from the data (empirical Bayes): the squared distance
  between ``c`` and ``m`` is fitted as ``T + S / n`` over the seen entries, and ``k = S / T``.
  This changes seen entries, so its seen-only scores are printed too.

Usage: python benchmarks/experiments/fill_corpus.py [--model PATH]
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks it builds on
from fill_variants import (  # noqa: E402
    average_in,
    distill_text,
    pair_cosines,
    spearman,
    start_benchmark,
    unit_rows,
)
from gensim_corpus import lee_documents, wiki_paragraphs  # noqa: E402
from quality import DATASETS  # noqa: E402
from spacy.language import Language  # noqa: E402

from roberta_static import DistillConfig, StaticVectors
from roberta_static.api import decontextualized
from roberta_static.model.encoder import Encoder
from roberta_static.quality.evaluate import dataset_path
from roberta_static.text.segment import load_segmenter
from roberta_static.text.vocab import MatchedSentence, Vocabulary
from roberta_static.vectors.fill import fit_map, held_out_check, held_out_split, mean_cosine

MIN_COUNT = 3
WORD_CONTEXTS = 50
DONORS = 5
DONOR_SENTENCES = 4
FOLDS = 10

Occurrence = tuple[int, int, int]  # sentence, start char, end char


def donor_sentences(
    nlp: Language, texts: list[str]
) -> tuple[list[str], dict[str, list[Occurrence]]]:
    """Every sentence, and each lower-cased alphabetic word's occurrence in each of its first
    :data:`DONOR_SENTENCES` sentences."""
    sentences: list[str] = []
    occurrences: dict[str, list[Occurrence]] = {}
    for doc in nlp.pipe(texts):
        for sentence in doc.sents:
            for token in sentence:
                if not token.text.isalpha():
                    continue
                found = occurrences.setdefault(token.lower_, [])
                if len(found) < DONOR_SENTENCES and (not found or found[-1][0] != len(sentences)):
                    start = token.idx - sentence.start_char
                    found.append((len(sentences), start, start + len(token)))
            sentences.append(sentence.text)
    return sentences, occurrences


def borrowed(
    encoder: Encoder,
    config: DistillConfig,
    entries: list[str],
    entry_alone: np.ndarray,
    donors: StaticVectors,
    sentences: list[str],
    occurrences: dict[str, list[Occurrence]],
) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's average over its nearest donors' sentences, with the entry in the donor's
    place, and each entry's mean cosine to its donors (decontextualized space)."""
    similarity = unit_rows(entry_alone) @ unit_rows(donors.vectors).T
    nearest = np.argsort(-similarity, axis=1)
    matched, closeness = [], []
    for row, entry in enumerate(entries):
        chosen = [j for j in nearest[row, : DONORS + 1] if donors.words[j] != entry][:DONORS]
        closeness.append(similarity[row, chosen].mean())
        for donor in chosen:
            for sentence, start, end in occurrences[donors.words[donor]]:
                text = sentences[sentence][:start] + entry + sentences[sentence][end:]
                matched.append(MatchedSentence(text, [(start, start + len(entry), row)]))
    vectors = average_in(encoder, config, len(entries), matched)
    return vectors.astype(np.float64), np.array(closeness)


def scores(vectors: StaticVectors) -> list[float]:
    """Spearman x 100 on each of :data:`DATASETS`, over the pairs the vectors cover."""
    result = []
    for d in DATASETS:
        sims, humans = pair_cosines(vectors, dataset_path(d)[1])
        result.append(spearman(sims, humans, np.ones(len(sims), bool)))
    return result


def leaning_on_the_map(
    x: np.ndarray, y: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, float]:
    """Seen vectors pulled toward their cross-fitted mapped vectors, and ``k``.

    Prints the fit of ``k``: the fitted and the mean squared distance by number of contexts.
    """
    prior = np.zeros_like(y)
    order = np.random.default_rng(0).permutation(len(x))
    for fold in range(FOLDS):
        test = order[fold::FOLDS]
        train = np.setdiff1d(order, test)
        prior[test] = fit_map(x[train], y[train])(x[test])
    distance = ((y - prior) ** 2).sum(axis=1)
    design = np.column_stack([np.ones(len(y)), 1 / counts])
    (between, within), *_ = np.linalg.lstsq(design, distance, rcond=None)
    print(f"squared distance to the mapped vector, T + S / n: T = {between:.2f}, S = {within:.2f}")
    for low, high in ((1, 1), (2, 3), (4, 10), (11, 50), (51, 300), (301, None)):
        group = (counts >= low) & (counts <= (high or counts.max()))
        predicted = between + within * np.mean(1 / counts[group])
        print(
            f"  {low}-{high or ''} contexts: {group.sum():4d} entries, "
            f"mean {distance[group].mean():.2f}, fitted {predicted:.2f}"
        )
    k = within / between
    n = counts[:, None].astype(np.float64)
    return (n * y + k * prior) / (n + k), float(k)


def main() -> None:
    started = time.perf_counter()
    vocab, config, model, tokenizer = start_benchmark(__doc__.splitlines()[0])
    texts = [*wiki_paragraphs(), *lee_documents()]
    nlp = load_segmenter("en")
    frequent = Vocabulary.from_corpus(nlp, texts, "lower", MIN_COUNT, None)
    others = Vocabulary.from_entries([w for w in frequent.entries if w not in vocab.entries])
    sentences, occurrences = donor_sentences(nlp, texts)
    seen = distill_text(model, tokenizer, texts, vocab, config)
    words_config = replace(config, max_contexts=WORD_CONTEXTS)
    other_seen = distill_text(model, tokenizer, texts, others, words_config)
    alone = decontextualized(model, tokenizer, vocab, config)
    frequent_alone = decontextualized(model, tokenizer, frequent, config)
    donor_words = [
        w for w in frequent_alone.words if len(occurrences.get(w, ())) == DONOR_SENTENCES
    ]
    donors = StaticVectors(
        donor_words, frequent_alone[donor_words], np.zeros(len(donor_words), dtype=np.int64)
    )
    print(f"encoder: {config.model}; layers {config.layers}, pool {config.pool}")
    print(
        f"corpus words seen {MIN_COUNT}+ times: {len(frequent)}, outside the vocabulary: "
        f"{len(others)}; donors (alphabetic, in {DONOR_SENTENCES}+ sentences): {len(donors)}"
    )

    fitted = [w for w in seen.words if w in alone]
    unseen = [w for w in alone.words if w not in seen]
    x, y = alone[fitted].astype(np.float64), seen[fitted].astype(np.float64)
    query = alone[unseen].astype(np.float64)
    test, train = held_out_split(len(fitted))
    extra = [w for w in other_seen.words if w in frequent_alone]
    extra_x = frequent_alone[extra].astype(np.float64)
    extra_y = other_seen[extra].astype(np.float64)
    print(f"seen {len(seen)}, fitted on {len(fitted)}, filled {len(unseen)}; held out {len(test)}")

    def filled_with(seen_vectors: np.ndarray, fill: np.ndarray) -> StaticVectors:
        return StaticVectors(
            [*fitted, *unseen],
            np.vstack([seen_vectors, fill]).astype(np.float32),
            np.zeros(len(fitted) + len(unseen), dtype=np.int64),
        )

    mapped = fit_map(x, y)(query)
    rows = {}
    rows["mapped (--fill-unseen mapped)"] = (
        filled_with(y, mapped),
        held_out_check(x, y)["mapped_cosine"],
    )
    both_x, both_y = np.vstack([x, extra_x]), np.vstack([y, extra_y])
    held_x, held_y = np.vstack([x[train], extra_x]), np.vstack([y[train], extra_y])
    rows[f"map fitted on the entries and {len(extra)} corpus words"] = (
        filled_with(y, fit_map(both_x, both_y)(query)),
        mean_cosine(fit_map(held_x, held_y)(x[test]), y[test]),
    )
    encoder = Encoder(model, tokenizer, config)
    lent = [*unseen, *(fitted[i] for i in test)]
    lent_alone = np.vstack([query, x[test]])
    lent_vectors, closeness = borrowed(
        encoder, config, lent, lent_alone, donors, sentences, occurrences
    )
    print(
        f"mean cosine to their {DONORS} donors: unseen entries {closeness[: len(unseen)].mean():.3f}, "
        f"held-out entries {closeness[len(unseen) :].mean():.3f}"
    )
    rows[f"borrowed contexts ({DONORS} donors x {DONOR_SENTENCES} sentences)"] = (
        filled_with(y, lent_vectors[: len(unseen)]),
        mean_cosine(lent_vectors[len(unseen) :], y[test]),
    )
    index = {w: i for i, w in enumerate(seen.words)}
    fitted_counts = seen.counts[[index[w] for w in fitted]]
    leaned, k = leaning_on_the_map(x, y, fitted_counts)
    leaning = f"rare entries lean on the map (k = {k:.2f})"
    rows[leaning] = (filled_with(leaned, mapped), None)

    header = f"{'method':55}" + "".join(f"{d + ' ρ':>15}" for d in DATASETS)
    print(header + f"{'held-out cos':>14}")
    seen_only = StaticVectors(fitted, y.astype(np.float32), fitted_counts)
    leaned_only = StaticVectors(fitted, leaned.astype(np.float32), fitted_counts)
    for name, vectors, cosine in [
        ("none (seen only)", seen_only, None),
        (f"{leaning}, seen only", leaned_only, None),
        *((name, vectors, cosine) for name, (vectors, cosine) in rows.items()),
    ]:
        row = f"{name:55}" + "".join(f"{s:>15.1f}" for s in scores(vectors))
        print(row + (f"{cosine:>14.3f}" if cosine is not None else ""))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
