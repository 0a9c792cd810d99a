"""The distilled vectors equal a naive per-sentence reference, for every pooling and combination."""

from __future__ import annotations

import codecs
import threading
import unicodedata
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import CORPUS_LINES, VOCAB_ENTRIES
from naive import find_occurrences, naive_distill
from test_precision import AMX, AVX2_ONLY, fake_cpu

from roberta_static import ConfigError, CorpusError, DistillConfig, VocabError, distill
from roberta_static.api import decontextualized, distill_from_model, resolve_inputs
from roberta_static.model.loading import load_pretrained
from roberta_static.progress import Plan
from roberta_static.text.vocab import Vocabulary
from roberta_static.vectors.fill import MIN_FITTED, mapped_fill


def assert_matches_reference(vectors, reference):
    assert sorted(vectors.words) == sorted(reference)
    for word, (expected, count) in reference.items():
        assert vectors.counts[vectors.words.index(word)] == count, word
        np.testing.assert_allclose(vectors[word], expected, atol=1e-5, rtol=1e-5, err_msg=word)


@pytest.mark.parametrize("pool", ["mean", "first", "last", "max"])
@pytest.mark.parametrize("combine", ["mean", "sum", "concat"])
def test_matches_naive_reference(model_dir, corpus_file, vocab_file, pool, combine):
    config = DistillConfig(model=str(model_dir), layers="0,-1", pool=pool, combine=combine)
    vectors = distill(corpus_file, vocab_file, config)
    reference = naive_distill(model_dir, CORPUS_LINES, VOCAB_ENTRIES, [0, -1], pool, combine)
    assert_matches_reference(vectors, reference)
    stats = vectors.meta["stats"]
    assert stats["split_sentences"] >= 1  # the long sentence went through windows
    assert stats["entries_found"] == len(VOCAB_ENTRIES) - 1  # "zebra" never occurs
    occurrences = find_occurrences(CORPUS_LINES, VOCAB_ENTRIES)
    never = [entry.lower() for entry, found in occurrences.items() if not found]
    assert stats["entries_not_found"] == never
    assert stats["entries_not_encoded"] == []


def test_truncated_model_and_max_contexts(model_dir, corpus_file, vocab_file):
    config = DistillConfig(model=str(model_dir), layers="1", max_contexts=2)
    vectors = distill(corpus_file, vocab_file, config)
    reference = naive_distill(
        model_dir, CORPUS_LINES, VOCAB_ENTRIES, [1], "mean", "mean", max_contexts=2
    )
    assert_matches_reference(vectors, reference)
    assert vectors.counts.max() == 2
    assert vectors.meta["stats"]["entries_not_found"] == ["zebra"]


def test_batch_budget_does_not_change_vectors(model_dir, corpus_file, vocab_file):
    small = distill(
        corpus_file, vocab_file, DistillConfig(model=str(model_dir), layers="1-2", batch_tokens=64)
    )
    large = distill(
        corpus_file,
        vocab_file,
        DistillConfig(model=str(model_dir), layers="1-2", batch_tokens=100_000),
    )
    assert small.words == large.words
    np.testing.assert_allclose(small.vectors, large.vectors, atol=1e-5)


def test_case_keep_matches_exact_case(roberta_dir, corpus_file, tmp_path):
    vocab = Vocabulary.from_entries(["Paris", "PARIS"], case="keep")
    config = DistillConfig(model=str(roberta_dir), layers="1", case="keep")
    vectors = distill(corpus_file, vocab, config)
    reference = naive_distill(
        roberta_dir, CORPUS_LINES, ["Paris", "PARIS"], [1], "mean", "mean", case="keep"
    )
    assert_matches_reference(vectors, reference)


def test_fill_unseen_decontextualized(roberta_dir, corpus_file, vocab_file):
    config = DistillConfig(model=str(roberta_dir), layers="1", fill_unseen="decontextualized")
    vectors = distill(corpus_file, vocab_file, config)
    assert vectors.counts[vectors.words.index("zebra")] == 0
    # The fill is the entry alone through the model: compare with the reference on a one-line corpus.
    alone = naive_distill(roberta_dir, ["zebra"], ["zebra"], [1], "mean", "mean")
    np.testing.assert_allclose(vectors["zebra"], alone["zebra"][0], atol=1e-5)
    assert vectors.meta["stats"]["entries_filled"] == 1


def test_entries_longer_than_the_model_limit_are_counted_never_zero_filled(roberta_dir, tmp_path):
    phrase = " ".join(["garden"] * 300)
    word = "x" * 3000
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"The cat sat. {phrase} .\nA {word} here, and the cat.\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(f"cat\n{word}\n{phrase}\n日本\n")
    for fill in ("none", "decontextualized"):
        config = DistillConfig(model=str(roberta_dir), layers="1", fill_unseen=fill)
        vectors = distill(corpus, vocab, config)
        filled = ["日本"] if fill == "decontextualized" else []
        assert vectors.words == ["cat", *filled] and vectors.counts[0] == 2
        assert np.linalg.norm(vectors.vectors, axis=1).min() > 0
        assert vectors.meta["stats"]["occurrences_too_long"] == 2
        assert vectors.meta["stats"]["entries_filled"] == len(filled)
        assert vectors.meta["stats"]["entries_not_found"] == ["日本"]
        assert vectors.meta["stats"]["entries_not_encoded"] == [word, phrase]
        not_filled = [word, phrase] if fill == "decontextualized" else []
        assert vectors.meta["stats"]["fill"].get("not_filled", []) == not_filled
    model, tokenizer = load_pretrained(config)
    alone = decontextualized(model, tokenizer, Vocabulary.from_file(vocab), config)
    assert alone.words == ["cat", "日本"]


def test_byte_order_marks_and_unicode_forms_lose_no_entry(roberta_dir, tmp_path):
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    lines = [f"The cat drank a {nfd} au lait.", f"Paris has a {nfc} near the garden."]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(codecs.BOM_UTF8 + "\n".join(lines).encode())
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(codecs.BOM_UTF8 + f"the\n{nfd}\ngarden\n".encode())
    vectors = distill(corpus, vocab, DistillConfig(model=str(roberta_dir), layers="1"))
    as_nfc = [unicodedata.normalize("NFC", line) for line in lines]
    reference = naive_distill(roberta_dir, as_nfc, ["the", nfc, "garden"], [1], "mean", "mean")
    assert [reference[w][1] for w in ("the", nfc)] == [2, 2]
    assert_matches_reference(vectors, reference)


def test_vocabulary_built_from_corpus(roberta_dir, corpus_file):
    config = DistillConfig(model=str(roberta_dir), layers="1", min_count=5)
    vectors = distill(corpus_file, None, config)
    words = [w.strip(".,;").lower() for line in CORPUS_LINES for w in line.split()]
    expected = {w for w, n in Counter(words).items() if n >= 5}
    assert set(vectors.words) == expected
    assert vectors.words == sorted(expected, key=lambda w: (-Counter(words)[w], w))


def test_the_words_counted_for_the_vocabulary_are_not_kept_by_the_pass_s_pipeline(
    roberta_dir, tmp_path, monkeypatch
):
    # spaCy keeps every string a pipeline has seen: counted with the pass's pipeline, every
    # word of the corpus would stay in memory to the pass's end.
    from roberta_static.engine.serial import SerialEngine

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the cat saw w{n}x" for n in range(200)) + "\n")
    known = []
    run = SerialEngine.run

    def noting_the_strings(self, job, *args):
        known.append("w199x" in job.nlp.vocab.strings)
        return run(self, job, *args)

    monkeypatch.setattr(SerialEngine, "run", noting_the_strings)
    vectors = distill(corpus, None, DistillConfig(model=str(roberta_dir), layers="1", min_count=5))
    assert sorted(vectors.words) == ["cat", "saw", "the"]
    assert known == [False]  # as the pass starts, its pipeline has not seen the words counted


def test_empty_corpus_is_an_error(roberta_dir, vocab_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(CorpusError, match="holds no text"):
        distill(empty, vocab_file, DistillConfig(model=str(roberta_dir), layers="1"))


def test_a_corpus_without_a_byte_is_refused_before_the_model_loads(vocab_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(CorpusError, match=f"{empty}: corpus holds no text"):
        distill(empty, vocab_file, DistillConfig(model=str(tmp_path / "no-model-here")))


def test_no_entry_found_is_an_error(roberta_dir, corpus_file):
    vocab = Vocabulary.from_entries(["zebra"])
    with pytest.raises(VocabError, match="none of the 1 vocabulary entries"):
        distill(corpus_file, vocab, DistillConfig(model=str(roberta_dir), layers="1"))


def test_installed_spacy_pipeline_sets_sentences(roberta_dir, corpus_file, vocab_file, tmp_path):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer", config={"punct_chars": [";"]})
    nlp.to_disk(tmp_path / "semicolons")
    config = DistillConfig(
        model=str(roberta_dir), layers="1", spacy_model=str(tmp_path / "semicolons")
    )
    vectors = distill(corpus_file, vocab_file, config)
    expected = sum(len(list(nlp(line).sents)) for line in CORPUS_LINES)
    assert vectors.meta["stats"]["sentences"] == expected
    default = distill(corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), layers="1"))
    assert default.meta["stats"]["sentences"] != expected


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine between each row of ``a`` and the same row of ``b``."""
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("dtype", ["bfloat16", "auto"])
def test_bfloat16_on_cpu_stays_close_to_float32(
    roberta_dir, corpus_file, vocab_file, monkeypatch, dtype
):
    """Asked for, or chosen by ``auto`` on a CPU whose bfloat16 units are faked."""
    fake_cpu(monkeypatch, AMX)
    config = DistillConfig(model=str(roberta_dir), layers="1-2", dtype=dtype)
    half = distill(corpus_file, vocab_file, config)
    full = distill(corpus_file, vocab_file, config.replace(dtype="float32"))
    assert half.meta["model"]["dtype"] == "bfloat16" and half.vectors.dtype == np.float32
    assert full.meta["model"]["dtype_reason"] == "asked for"
    assert cosines(full.vectors, half.vectors).min() > 0.99


def test_auto_on_a_cpu_without_bfloat16_units_is_exactly_float32(
    roberta_dir, corpus_file, vocab_file, monkeypatch
):
    fake_cpu(monkeypatch, AVX2_ONLY)
    config = DistillConfig(model=str(roberta_dir), layers="1-2")
    auto = distill(corpus_file, vocab_file, config)
    full = distill(corpus_file, vocab_file, config.replace(dtype="float32"))
    assert auto.meta["model"]["dtype"] == "float32"
    assert auto.meta["model"]["dtype_reason"].startswith("auto: the CPU has no bfloat16 units")
    np.testing.assert_array_equal(auto.vectors, full.vectors)


def test_int8_linear_layers_stay_close_to_float32(
    roberta_dir, corpus_file, vocab_file, monkeypatch
):
    fake_cpu(monkeypatch, AMX)  # auto would be bfloat16 without int8
    config = DistillConfig(model=str(roberta_dir), layers="1-2", quantize="int8")
    model, tokenizer = load_pretrained(config)
    texts, vocab = resolve_inputs(corpus_file, vocab_file, config)
    quantized = distill_from_model(model, tokenizer, texts, vocab, config)
    full = distill(corpus_file, vocab_file, config.replace(quantize="none", dtype="float32"))
    assert quantized.meta["model"]["dtype"] == "float32"
    assert quantized.meta["config"]["quantize"] == "int8"
    assert type(model.encoder.layer[0].intermediate.dense) is torch.nn.Linear  # the caller's
    cosine = cosines(full.vectors, quantized.vectors)
    assert cosine.min() > 0.95 and not np.array_equal(full.vectors, quantized.vectors)


def overflow_in_half_precision(module, args, output):
    """Forward hook: the block's output turns to Inf whenever it runs in bfloat16."""
    hidden = output[0] if isinstance(output, tuple) else output
    if hidden.dtype != torch.bfloat16:
        return None
    hidden = hidden.clone()
    hidden[..., 0] = float("inf")
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


@pytest.mark.parametrize("dtype", ["bfloat16", "auto"])
def test_a_half_precision_overflow_is_recomputed_in_float32(
    roberta_dir, corpus_file, vocab_file, monkeypatch, dtype
):
    """On the CPU too, asked for or chosen by ``auto`` (bfloat16 units faked)."""
    fake_cpu(monkeypatch, AMX)
    config = DistillConfig(model=str(roberta_dir), layers="1-2", dtype=dtype)
    model, tokenizer = load_pretrained(config)
    model.encoder.layer[0].register_forward_hook(overflow_in_half_precision)
    texts, vocab = resolve_inputs(corpus_file, vocab_file, config)
    vectors = distill_from_model(model, tokenizer, texts, vocab, config)
    full = distill(corpus_file, vocab_file, config.replace(dtype="float32"))
    assert np.isfinite(vectors.vectors).all()
    assert vectors.meta["model"]["dtype"] == "bfloat16"
    assert vectors.meta["stats"]["batches_recomputed_float32"] >= 1
    assert full.meta["stats"]["batches_recomputed_float32"] == 0
    assert next(model.parameters()).dtype == torch.bfloat16
    assert cosines(full.vectors, vectors.vectors).min() > 0.99


def test_accumulator_size_is_reported_and_refused_beyond_free_memory(
    roberta_dir, corpus_file, vocab_file, monkeypatch
):
    config = DistillConfig(model=str(roberta_dir), layers="0-2", combine="concat")
    reports = []
    vectors = distill(corpus_file, vocab_file, config, progress=reports.append)
    (plan,) = [r for r in reports if isinstance(r, Plan)]
    assert (plan.entries, plan.dim, plan.device) == (len(VOCAB_ENTRIES), 96, "cpu")
    assert plan.accumulator_bytes == len(VOCAB_ENTRIES) * (96 * 8 + 8)  # float64 sums
    assert vectors.dim == plan.dim
    monkeypatch.setattr("roberta_static.api.free_memory", lambda device: 1000)
    with pytest.raises(ConfigError) as caught:
        distill(corpus_file, vocab_file, config)
    needed = f"{plan.accumulator_bytes / 1e3:.1f} kB"
    assert str(caught.value).startswith(
        f"the accumulator needs {needed} ({len(VOCAB_ENTRIES)} entries x 96 floats) but cpu has "
        "1.0 kB free; use fewer layers, or combine them by mean or sum instead of concat"
    )


def test_pca_wider_than_the_vectors_is_refused(roberta_dir, corpus_file, vocab_file):
    with pytest.raises(ConfigError, match="pca: 33 exceeds the vectors' width 32"):
        distill(corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), layers="1", pca=33))


def test_texts_in_memory_and_a_vocabulary_list_equal_the_files(
    roberta_dir, corpus_file, vocab_file
):
    config = DistillConfig(model=str(roberta_dir), layers="1")
    from_files = distill(corpus_file, vocab_file, config)
    in_memory = distill(texts=CORPUS_LINES, vocab=VOCAB_ENTRIES, config=config)
    assert in_memory.words == from_files.words
    np.testing.assert_array_equal(in_memory.counts, from_files.counts)
    np.testing.assert_allclose(in_memory.vectors, from_files.vectors, atol=1e-6)
    size = sum(len(line.encode()) for line in CORPUS_LINES)
    assert in_memory.meta["corpus"] == [{"path": "<texts in memory>", "bytes": size}]
    built = distill(texts=CORPUS_LINES, config=config.replace(min_count=5))  # read twice
    assert built.words == distill(corpus_file, None, config.replace(min_count=5)).words


def test_a_generator_of_texts_is_streamed_not_materialised(roberta_dir):
    read = []

    def column():  # like (row.text for row in df.itertuples())
        for number in range(100_000):
            read.append(number)
            yield CORPUS_LINES[number % len(CORPUS_LINES)]

    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=3)
    vectors = distill(texts=column(), vocab=["cat", "dog"], config=config)
    assert vectors.counts.tolist() == [3, 3] and vectors.meta["stats"]["stopped_early"]
    assert len(read) < 5_000  # spaCy reads a batch ahead, never the whole column


def test_strings_are_never_guessed_to_be_texts_or_paths(roberta_dir, corpus_file, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1")
    with pytest.raises(CorpusError, match="^The cat sat.: no such file or folder$"):
        distill(["The cat sat."], ["cat"], config)
    with pytest.raises(ConfigError, match="either corpus .* or texts"):
        distill(corpus_file, ["cat"], config, texts=["The cat sat."])
    with pytest.raises(ConfigError, match="either corpus .* or texts"):
        distill(vocab=["cat"], config=config)
    with pytest.raises(ConfigError, match="a generator can be read once; pass vocab"):
        distill(texts=(line for line in CORPUS_LINES), config=config)
    with pytest.raises(VocabError, match="vocab: the list holds no entry"):
        distill(texts=CORPUS_LINES, vocab=["", "  "], config=config)
    with pytest.raises(CorpusError, match="texts: item 1 is int, expected str"):
        distill(texts=["The cat sat.", 3], vocab=["cat"], config=config)


def test_texts_in_memory_cannot_be_checkpointed(roberta_dir, tmp_path):
    from roberta_static.stopping import Checkpointing

    config = DistillConfig(model=str(roberta_dir), layers="1")
    with pytest.raises(ConfigError, match="texts in memory cannot be resumed"):
        distill(
            texts=CORPUS_LINES,
            vocab=["cat"],
            config=config,
            checkpointing=Checkpointing(tmp_path / "out"),
        )
    assert not (tmp_path / "out").exists()


def test_fill_unseen_mapped(roberta_dir, corpus_file, tmp_path):
    words = sorted({w.strip(".,;").lower() for line in CORPUS_LINES for w in line.split()})
    vocab = Vocabulary.from_entries([*words, "zebra", "quantum"])
    config = DistillConfig(model=str(roberta_dir), layers="1-2", fill_unseen="mapped")
    model, tokenizer = load_pretrained(config)
    corpus = resolve_inputs(corpus_file, None, config)[0]
    vectors = distill_from_model(model, tokenizer, corpus, vocab, config)
    seen = distill_from_model(model, tokenizer, corpus, vocab, replace(config, fill_unseen="none"))
    alone = decontextualized(model, tokenizer, vocab, config)
    # Reference: ridge fitted on (alone, seen) pairs, applied to the unseen entries alone.
    expected, record = mapped_fill(alone[seen.words], seen.vectors, alone[["zebra", "quantum"]])
    np.testing.assert_allclose(vectors[["zebra", "quantum"]], expected, atol=1e-4)
    assert vectors.counts[vectors.words.index("zebra")] == 0
    fill = vectors.meta["stats"]["fill"]
    assert (
        fill == {**record, "not_filled": []} and fill["fitted_on"] == len(seen.words) >= MIN_FITTED
    )
    assert vectors.meta["stats"]["entries_filled"] == 2


def test_fill_unseen_mapped_refuses_too_few_seen_entries(roberta_dir, corpus_file, vocab_file):
    config = DistillConfig(model=str(roberta_dir), layers="1", fill_unseen="mapped")
    with pytest.raises(ConfigError, match=f"fill_unseen: mapped needs at least {MIN_FITTED}"):
        distill(corpus_file, vocab_file, config)


@pytest.fixture
def no_model(monkeypatch):
    """Fail any test that gets as far as loading the model."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("roberta_static.api.load_pretrained", refuse)


def test_an_unavailable_device_is_refused_before_the_model_loads(no_model, corpus_file):
    config = DistillConfig(model="any", device="cpu,cuda:7")
    with pytest.raises(ConfigError, match="device: cuda:7 is not available on this machine"):
        distill(corpus_file, ["cat"], config)


@pytest.mark.parametrize("workers", [1, 2])
def test_meta_counts_the_encoder_s_batches_and_the_time_it_waited_for_them(
    workers, roberta_dir, tmp_path, vocab_file, monkeypatch
):
    from roberta_static.engine.producer import Producer
    from roberta_static.text.corpus import Corpus

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 10) + "\n")
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8, workers=workers
    )
    model, tokenizer = load_pretrained(config)
    forwards = []
    model.register_forward_pre_hook(lambda module, args: forwards.append(1))
    make_chunk, chunks = Producer._chunk, []

    def slow_chunk(self, *args):  # a CPU side much slower than the tiny encoder: it waits
        chunks.append(1)
        threading.Event().wait(0.1)
        return make_chunk(self, *args)

    if workers == 1:  # worker processes build their own producer
        monkeypatch.setattr(Producer, "_chunk", slow_chunk)
    vocab = Vocabulary.from_file(vocab_file, "lower")
    stats = distill_from_model(model, tokenizer, Corpus([corpus]), vocab, config).meta["stats"]
    assert stats["batches"] == len(forwards) > 3
    assert 0 < stats["encoder_wait_seconds"] < stats["seconds"]
    if workers == 1:  # most of the 0.1 s each chunk took, with a wide margin for a loaded machine
        assert stats["encoder_wait_seconds"] >= 0.025 * len(chunks) > 0
