"""Sentence targets from the pass: the teacher's vectors of a sample, on every engine, resumed."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from test_tune import made_up_texts
from typer.testing import CliRunner

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.cli import app
from roberta_static.engine.checkpoint import load_checkpoint
from roberta_static.errors import Interrupted, VectorsError
from roberta_static.model.teacher import sentence_vectors, teacher_pooling
from roberta_static.stopping import Checkpointing
from roberta_static.vectors.target_files import has_targets, read_targets
from roberta_static.vectors.targets import sentence_key

WORDS = ["cat", "dog", "bird", "garden", "house", "sun", "city", "river", "paris", "green"]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """A folder of three files of made-up sentences, one a line, some lines repeated."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    texts = made_up_texts(240, seed=3)
    for number in range(3):
        part = texts[number * 80 : (number + 1) * 80]
        (folder / f"{number}.txt").write_text("\n".join(part + part[:5]) + "\n")
    return folder


def sentences_with_entries(folder: Path) -> set[str]:
    return {
        line
        for path in sorted(folder.iterdir())
        for line in path.read_text().splitlines()
        if any(word in WORDS for word in line.rstrip(".").split())
    }


def config(model: Path, **options: object) -> DistillConfig:
    return DistillConfig(
        model=str(model), layers="1", max_contexts=0, sentence_targets=25, **options
    )


def test_the_pass_keeps_the_teachers_vector_of_the_sentences_with_the_smallest_keys(
    bert_dir, corpus
):
    from transformers import AutoModel, AutoTokenizer

    vectors = distill(corpus, WORDS, config(bert_dir))
    targets = vectors.targets
    texts = {sentence_key(text): text for text in sentences_with_entries(corpus)}
    assert len(texts) > 25 and len(targets) == 25
    assert targets.keys.tolist() == sorted(texts)[:25]  # each text once, the smallest keys
    # The teacher's own vector of each text alone: the model, its tokenizer and its pooling.
    tokenizer = AutoTokenizer.from_pretrained(bert_dir)
    model = AutoModel.from_pretrained(bert_dir).eval()
    pooling = teacher_pooling(bert_dir)
    rows = {word: row for row, word in enumerate(vectors.words)}
    for number, key in enumerate(targets.keys.tolist()):
        text = texts[key]
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state
        expected = sentence_vectors(hidden, encoded["attention_mask"], pooling)[0].numpy()
        np.testing.assert_allclose(targets.vectors[number], expected, atol=1e-5)
        words = [word for word in text.rstrip(".").split() if word in rows]
        start, end = targets.indptr[number], targets.indptr[number + 1]
        held = dict(
            zip(
                targets.entries[start:end].tolist(), targets.counts[start:end].tolist(), strict=True
            )
        )
        assert held == {rows[word]: words.count(word) for word in set(words)}


def test_a_sentence_read_again_takes_one_place_in_the_sample(bert_dir, tmp_path):
    smaller, larger = sorted(["The cat sat.", "The dog ran."], key=sentence_key)
    text = tmp_path / "repeats.txt"
    text.write_text(f"{smaller}\n" * 6 + f"{larger}\n")
    targets = distill(text, ["cat", "dog"], config(bert_dir).replace(sentence_targets=2)).targets
    assert targets.keys.tolist() == [sentence_key(smaller), sentence_key(larger)]


def test_without_the_option_nothing_changes_and_with_it_the_vectors_are_the_same(
    roberta_dir, corpus
):
    off = distill(corpus, WORDS, config(roberta_dir).replace(sentence_targets=0))
    on = distill(corpus, WORDS, config(roberta_dir))
    assert off.targets is None and on.targets is not None
    np.testing.assert_array_equal(on.vectors, off.vectors)
    timing = {"seconds", "encoder_wait_seconds"}
    for key in off.meta["stats"].keys() - timing:
        assert on.meta["stats"][key] == off.meta["stats"][key], key


def assert_same_targets(a, b) -> None:
    assert a.keys.tolist() == b.keys.tolist()
    assert a.entries.tolist() == b.entries.tolist() and a.counts.tolist() == b.counts.tolist()
    np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-5)


def test_every_engine_and_a_resumed_run_keep_the_same_targets(
    roberta_dir, corpus, tmp_path, monkeypatch
):
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)
    one = distill(corpus, WORDS, config(roberta_dir, chunk_sentences=8))
    two = distill(corpus, WORDS, config(roberta_dir, chunk_sentences=8, workers=2))
    assert_same_targets(one.targets, two.targets)
    # Stopped once a batch is summed: the checkpoint holds the sample so far.
    stop = threading.Event()
    checkpointing = Checkpointing(tmp_path / "out", 0, stop)

    def stop_once_summed(report) -> None:
        if getattr(report, "tokens", 0):
            stop.set()

    stopped = config(roberta_dir, chunk_sentences=8, batch_tokens=64, workers=2)
    with pytest.raises(Interrupted, match="resume with"):
        distill(corpus, WORDS, stopped, stop_once_summed, checkpointing)
    saved = load_checkpoint(tmp_path / "out")
    assert saved.state.targets is not None and 0 < len(saved.state.targets) <= 25
    assert has_targets(tmp_path / "out" / ".checkpoint")
    resumed = distill(corpus, WORDS, config(roberta_dir, chunk_sentences=8), resume_from=saved)
    assert_same_targets(one.targets, resumed.targets)


def test_a_folder_keeps_its_targets_and_merge_takes_those_of_both_texts(
    roberta_dir, corpus, tmp_path
):
    files = sorted(corpus.iterdir())
    whole = distill(files, WORDS, config(roberta_dir))
    first, second = (distill(part, WORDS, config(roberta_dir)) for part in (files[:2], files[2:]))
    for name, vectors in (("first", first), ("second", second)):
        vectors.save(tmp_path / name)
        assert_same_targets(read_targets(tmp_path / name, vectors.words), vectors.targets)
    merged = StaticVectors.load_merged([tmp_path / "first", tmp_path / "second"])
    # The merged rows differ from the whole's: compare sentences by key, entries by word.
    assert merged.targets.keys.tolist() == whole.targets.keys.tolist()
    assert entry_words(merged) == entry_words(whole)
    np.testing.assert_allclose(merged.targets.vectors, whole.targets.vectors, atol=1e-5)


def entry_words(vectors: StaticVectors) -> list[list[tuple[str, int]]]:
    """Each target sentence's entries, as words with their counts."""
    targets = vectors.targets
    bounds = zip(targets.indptr[:-1].tolist(), targets.indptr[1:].tolist(), strict=True)
    return [
        sorted(
            (vectors.words[e], c)
            for e, c in zip(targets.entries[a:b], targets.counts[a:b], strict=True)
        )
        for a, b in bounds
    ]


def test_merge_refuses_vectors_with_targets_beside_vectors_without(roberta_dir, corpus, tmp_path):
    import shutil

    files = sorted(corpus.iterdir())
    distill(files[:2], WORDS, config(roberta_dir)).save(tmp_path / "with")
    distill(files[2:], WORDS, config(roberta_dir).replace(sentence_targets=0)).save(
        tmp_path / "without"
    )
    with pytest.raises(VectorsError, match="differ in sentence_targets: 25 against 0"):
        StaticVectors.load_merged([tmp_path / "with", tmp_path / "without"])
    # Kept by the same options, then removed from one folder.
    distill(files[2:], WORDS, config(roberta_dir)).save(tmp_path / "removed")
    shutil.rmtree(tmp_path / "removed" / "targets")
    with pytest.raises(VectorsError, match=r"with holds sentence targets and \S+removed does not"):
        StaticVectors.load_merged([tmp_path / "with", tmp_path / "removed"])


def test_the_command_keeps_targets_and_tune_learns_from_them(bert_dir, corpus, tmp_path):
    runner = CliRunner()
    out, tuned = tmp_path / "vectors", tmp_path / "tuned"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    args = ["distill", str(corpus), "--vocab", str(vocab), "-m", str(bert_dir), "-o", str(out)]
    result = runner.invoke(app, [*args, "--sentence-targets", "200", "--max-contexts", "0", "-q"])
    assert result.exit_code == 0, result.output
    assert has_targets(out)
    result = runner.invoke(app, ["tune", str(out), "--out", str(tuned), "--max-epochs", "3"])
    assert result.exit_code == 0, result.output
    assert (tuned / "weights.npy").exists()
