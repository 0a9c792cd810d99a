"""The engine's parts one by one: pooling, the pass state and its merge, the producer, the
checkpoint's round trip, the serial engine's producer thread. The end-to-end guards (same
vectors whichever engine, stopped or not) are in test_pipeline, test_checkpoint, test_workers.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch
from conftest import CORPUS_LINES

from roberta_static.config import DistillConfig
from roberta_static.engine.base import Job
from roberta_static.engine.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from roberta_static.engine.serial import SerialEngine, ThreadFeeder
from roberta_static.engine.sharding import whole_corpus
from roberta_static.engine.state import PassState, ShardState
from roberta_static.engine.stats import RunStats
from roberta_static.errors import ConfigError, CorpusError
from roberta_static.model.batches import Batch, EncoderInput
from roberta_static.model.encoder import Encoder
from roberta_static.model.loading import load_pretrained
from roberta_static.model.pooling import (
    Accumulator,
    Occurrences,
    combine_layers,
    occurrence_arrays,
    occurrence_vectors,
    pool_occurrences,
)
from roberta_static.text.corpus import Corpus, Position
from roberta_static.text.segment import load_segmenter
from roberta_static.text.shards import Shard, plan_shards
from roberta_static.text.vocab import Vocabulary

# --- pooling -------------------------------------------------------------------------------


def _occurrences(batch: Batch) -> Occurrences:
    return Occurrences(*map(torch.from_numpy, occurrence_arrays(batch)))


def _batch(tokens: int, starts: list[int], ends: list[int], entries: list[int]) -> Batch:
    """One row of ``tokens`` tokens with occurrences at ``starts:ends`` of ``entries``."""
    return Batch(
        input_ids=np.zeros((1, tokens), dtype=np.int64),
        attention_mask=np.ones((1, tokens), dtype=np.int64),
        rows=np.zeros(len(starts), dtype=np.int64),
        starts=np.array(starts),
        ends=np.array(ends),
        entries=np.array(entries),
    )


def test_pooling_reads_each_occurrence_s_subwords_and_combines_layers():
    # [layers=2, batch=1, tokens=4, hidden=2]: token t of layer l holds (10 l + t, -t).
    hidden = torch.tensor(
        [[[[10 * layer + t, -t] for t in range(4)]] for layer in range(2)], dtype=torch.float64
    )
    occurrences = _occurrences(_batch(4, starts=[0, 1], ends=[1, 4], entries=[0, 1]))
    expected = {
        "mean": [[[0, 0], [2, -2]], [[10, 0], [12, -2]]],
        "first": [[[0, 0], [1, -1]], [[10, 0], [11, -1]]],
        "last": [[[0, 0], [3, -3]], [[10, 0], [13, -3]]],
        "max": [[[0, 0], [3, -1]], [[10, 0], [13, -1]]],
    }
    for pool, values in expected.items():
        pooled = pool_occurrences(hidden, occurrences, pool)
        assert pooled.tolist() == values, pool
    pooled = pool_occurrences(hidden, occurrences, "mean")
    assert combine_layers(pooled, "mean").tolist() == [[5, 0], [7, -2]]
    assert combine_layers(pooled, "sum").tolist() == [[10, 0], [14, -4]]
    assert combine_layers(pooled, "concat").tolist() == [[0, 0, 10, 0], [2, -2, 12, -2]]


def test_the_accumulator_sums_per_entry_and_goes_on_from_a_saved_state():
    occurrences = _occurrences(_batch(3, starts=[0, 1, 2], ends=[1, 2, 3], entries=[2, 0, 2]))
    hidden = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)  # one layer, one dim
    vectors = occurrence_vectors(hidden, occurrences, "mean", "mean")
    first = Accumulator(3, 1)
    first.add(vectors, occurrences.entries)
    sums, counts = first.state()
    assert sums[:, 0].tolist() == [1, 0, 2] and counts.tolist() == [1, 0, 2]
    second = Accumulator(3, 1)
    second.restore(sums, counts)
    second.add(vectors, occurrences.entries)
    assert second.state()[0][:, 0].tolist() == [2, 0, 4]


# --- the pass state ------------------------------------------------------------------------


def _shard(number: int) -> ShardState:
    shard = Shard(Position(0, number * 10, 1, 0), Position(0, number * 10 + 10, 1, 0))
    return ShardState.fresh(shard, np.full(3, 5))


def test_merge_adds_sums_and_counters_and_keeps_the_shards_in_order():
    first = PassState.of_sums(
        np.array([[1.0, 1.0], [0, 0], [2, 2]]), np.array([1, 0, 2]), RunStats(tokens=4), [_shard(0)]
    )
    later = PassState.of_sums(
        np.array([[0.0, 0], [3, 3], [4, 4]]), np.array([0, 1, 3]), RunStats(tokens=6), [_shard(1)]
    )
    assert first.rows.tolist() == [0, 2]  # only the entries seen are kept
    merged = first.merge(later)
    sums, counts = merged.dense(3)
    assert sums.tolist() == [[1, 1], [3, 3], [6, 6]] and counts.tolist() == [1, 1, 5]
    assert merged.stats.tokens == 10
    assert [s.shard for s in merged.shards] == [_shard(0).shard, _shard(1).shard]
    means, _ = merged.means(3)
    assert means.dtype == np.float32
    np.testing.assert_allclose(means[2], [1.2, 1.2], rtol=1e-6)


@pytest.fixture()
def job(roberta_dir, tmp_path) -> Job:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS_LINES * 20) + "\n", encoding="utf-8")
    config = DistillConfig(model=str(roberta_dir), layers="1-2", max_contexts=0, chunk_sentences=8)
    model, tokenizer = load_pretrained(config)
    vocab = Vocabulary.from_entries(["the", "cat", "dog", "river", "bank"])
    nlp = load_segmenter(config.lang, config.spacy_model)
    return Job(
        model, tokenizer, Encoder(model, tokenizer, config), nlp, Corpus([path]), vocab, config
    )


def test_the_states_of_shards_merged_in_order_are_the_state_of_one_pass(job):
    entries = len(job.vocab)
    whole = SerialEngine().run(job, None, None, lambda _: None)
    shards = plan_shards(job.corpus.files, shard_bytes=1_000)
    assert len(shards) > 2
    parts = [
        SerialEngine().run(
            job,
            PassState.empty(job.dim, [ShardState.fresh(s, np.full(entries, 10**9))]),
            None,
            lambda _: None,
        )
        for s in shards
    ]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    sums, counts = merged.dense(entries)
    expected_sums, expected_counts = whole.dense(entries)
    np.testing.assert_array_equal(counts, expected_counts)
    # Batches differ at the shards' edges, and the encoder computes in float32.
    np.testing.assert_allclose(sums, expected_sums, rtol=1e-6)
    merged_stats, whole_stats = asdict(merged.run_stats()), asdict(whole.run_stats())
    for key in (
        "text_units",
        "sentences",
        "sentences_encoded",
        "windows",
        "tokens",
    ):
        assert merged_stats[key] == whole_stats[key], key


# --- the producer --------------------------------------------------------------------------


def test_the_producer_reads_a_shard_in_chunks_to_its_end_and_counts_what_it_takes(job):
    producer = replace(job, config=job.config.replace(chunk_sentences=2)).producer()
    shard = plan_shards(job.corpus.files, shard_bytes=1_000)[1]
    state = ShardState.fresh(shard, np.full(len(job.vocab), 3))
    chunks = list(producer.chunks(state))
    assert len(chunks) > 1 and [c.state.done for c in chunks] == [False] * (len(chunks) - 1) + [
        True
    ]
    positions = [(c.state.position.offset, c.state.position.skip) for c in chunks]
    assert positions == sorted(positions) and shard.start.offset < positions[0][0]
    ends = [c.end_bytes for c in chunks]
    assert (
        ends == sorted(ends)
        and ends[-1]
        == shard.byte_range(job.corpus.files)[1] - shard.byte_range(job.corpus.files)[0]
    )
    taken = np.bincount(
        np.concatenate([i.occurrences[:, 2] for c in chunks for i in c.inputs]),
        minlength=len(job.vocab),
    )
    # At most 3 occurrences of each entry, counted down in the state; the shard holds more.
    assert (taken <= 3).all() and (state.quota - state.remaining == taken).all()
    assert (producer.count(shard, len(job.vocab)) >= taken).all()
    assert 0 < state.stats.sentences_encoded <= state.stats.sentences


def test_counting_finds_every_occurrence_the_pass_takes_without_a_limit(job):
    producer = job.producer()
    shard = whole_corpus(job.corpus, len(job.vocab), job.config).shard
    state = ShardState.fresh(shard, np.full(len(job.vocab), 10**9))
    taken = np.bincount(
        np.concatenate([i.occurrences[:, 2] for c in producer.chunks(state) for i in c.inputs]),
        minlength=len(job.vocab),
    )
    np.testing.assert_array_equal(producer.count(shard, len(job.vocab)), taken)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_chunk_crosses_a_process_boundary_as_it_was(count):
    import pickle

    from roberta_static.engine.producer import Chunk

    inputs = [
        EncoderInput(np.arange(3 + i), np.array([[1, 2, i]] * (i % 2 + 1))) for i in range(count)
    ]
    chunk = Chunk(inputs, _shard(0), end_bytes=42)
    back = pickle.loads(pickle.dumps(chunk))
    assert (back.end_bytes, back.state.shard, len(back.inputs)) == (42, chunk.state.shard, count)
    for a, b in zip(back.inputs, inputs, strict=True):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.occurrences, b.occurrences)
    assert back.inputs is not chunk.inputs and chunk.inputs == inputs  # the sender's untouched


# --- checkpoints ---------------------------------------------------------------------------


def test_a_checkpoint_reads_back_as_it_was_written(tmp_path):
    inputs = [
        EncoderInput(np.array([0, 5, 6, 2]), np.array([[1, 3, 1]])),
        EncoderInput(np.array([0, 7, 2]), np.array([[1, 2, 0], [1, 2, 2]])),
    ]
    shards = [_shard(0), _shard(1)]
    shards[0].done, shards[0].stats = True, RunStats(sentences=7, binary_files_skipped=["x.bin"])
    shards[1].position, shards[1].remaining = Position(0, 14, 2, 1), np.array([5, 4, 0])
    shards[1].leftover = inputs
    state = PassState.of_sums(
        np.array([[0.5, 1.5], [0, 0], [2, 2]]),
        np.array([1, 0, 3]),
        RunStats(tokens=9, seconds=1.5),
        shards,
    )
    written = Checkpoint(
        {"model": "m"}, ["/a.txt"], [{"path": "/a.txt"}], ["x", "y", "z"], {"counted": 0}, state
    )
    save_checkpoint(tmp_path, written)
    read = load_checkpoint(str(tmp_path))  # a path as a string too
    assert (read.config, read.files, read.corpus, read.entries, read.vocabulary) == (
        written.config,
        written.files,
        written.corpus,
        written.entries,
        written.vocabulary,
    )
    for name in ("rows", "sums", "counts"):
        np.testing.assert_array_equal(getattr(read.state, name), getattr(state, name))
    assert read.state.stats == state.stats
    for got, want in zip(read.state.shards, shards, strict=True):
        assert (got.shard, got.position, got.stats, got.done, got.may_stop_early) == (
            want.shard,
            want.position,
            want.stats,
            want.done,
            want.may_stop_early,
        )
        np.testing.assert_array_equal(got.remaining, want.remaining)
        np.testing.assert_array_equal(got.quota, want.quota)
        assert len(got.leftover) == len(want.leftover)
        for a, b in zip(got.leftover, want.leftover, strict=True):
            for name in asdict(a):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_a_checkpoint_of_an_older_format_is_refused_in_one_line(tmp_path):
    folder = tmp_path / ".checkpoint"
    folder.mkdir()
    (folder / "state.json").write_text('{"format": 2}')
    with pytest.raises(
        ConfigError,
        match=r"^\S+\.checkpoint: written by an older roberta-static \(checkpoint format 2\), which "
        r"this one cannot resume; run the distill command again with --overwrite instead of "
        r"--resume$",
    ):
        load_checkpoint(tmp_path)


# --- the serial engine's producer thread ---------------------------------------------------


class _Producer:
    """A producer whose chunks are the numbers ``items`` yields."""

    def __init__(self, items) -> None:
        self.items = items

    def chunks(self, state):
        yield from self.items()


def _receive_all(feeder: ThreadFeeder) -> list:
    got = []
    while (message := feeder.receive(None)) is not None:
        got.append(message[2])
        if message[2] == "end":
            return got
    return got


def test_the_producer_thread_keeps_order_and_runs_in_its_own_thread():
    threads = set()

    def items():
        for i in range(50):
            threads.add(threading.current_thread().name)
            yield i
        yield "end"

    with ThreadFeeder(_Producer(items), 1) as feeder:
        feeder.submit(("encode", 0, None))
        assert _receive_all(feeder) == [*range(50), "end"]
    assert threads == {"roberta-static-producer"}


def test_an_error_in_the_producer_thread_is_raised_by_receive_as_one_line():
    def items():
        yield 1
        raise ValueError("bad chunk")

    with ThreadFeeder(_Producer(items), 1) as feeder:
        feeder.submit(("encode", 0, None))
        assert feeder.receive(None)[2] == 1
        with pytest.raises(CorpusError, match="worker failed: ValueError: bad chunk"):
            feeder.receive(None)


def test_a_closed_producer_thread_stops_without_anyone_waiting_for_its_chunk_in_hand():
    produced, release = [], threading.Event()

    def items():
        for i in range(10_000):
            produced.append(i)
            if i == 3:
                release.wait(30)  # a chunk that takes long to make
            yield i

    with ThreadFeeder(_Producer(items), 1) as feeder:
        feeder.submit(("encode", 0, None))
        assert feeder.receive(None)[2] == 0
        while len(produced) < 4:  # the thread makes chunk 3, the queue ahead of it full
            release.wait(0.01)
    # Closed while its thread makes a chunk: the close returned at once.
    assert feeder.thread.is_alive(), "the close waited for the producer"
    release.set()
    feeder.thread.join(timeout=10)
    assert not feeder.thread.is_alive() and len(produced) <= 6
