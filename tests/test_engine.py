"""The engine's parts one by one: pooling, the pass state and its merge, the producer, the
checkpoint's round trip, the serial engine's producer thread. The end-to-end guards (same
vectors whichever engine, stopped or not) are in test_pipeline, test_checkpoint, test_workers.
"""

from __future__ import annotations

import threading
import tracemalloc
from array import array
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch
from conftest import CORPUS_LINES

from roberta_static.config import DistillConfig
from roberta_static.engine import producer as producer_module
from roberta_static.engine.base import Job
from roberta_static.engine.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from roberta_static.engine.encoders import EncoderThreads
from roberta_static.engine.messages import Chunk, Counted, CountShard, EncodeShard
from roberta_static.engine.quotas import NEVER, EntryCounts, QuotaPlan
from roberta_static.engine.reading import ShardReading
from roberta_static.engine.schedule import Schedule, fresh_state, whole_corpus
from roberta_static.engine.serial import SerialEngine, ThreadFeeder
from roberta_static.engine.state import PassState, ShardState, shard_bytes
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
from roberta_static.text.corpus import Corpus, CorpusIdentity, Position
from roberta_static.text.files import FileList
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
    rows = np.flatnonzero(counts)
    assert first.sums_of(rows)[:, 0].tolist() == [1, 2]
    second = Accumulator(3, 1)
    second.add(vectors, occurrences.entries)  # what it held before is replaced
    second.restore(rows, sums[rows], counts[rows])
    second.add(vectors, occurrences.entries)
    assert second.state()[0][:, 0].tolist() == [2, 0, 4]
    assert second.state()[1].tolist() == [2, 0, 4]


# --- the pass state ------------------------------------------------------------------------


def _state_of_sums(sums: np.ndarray, counts: np.ndarray, stats: RunStats, **parts) -> PassState:
    """The state holding dense ``[entries, dim]`` sums and ``[entries]`` counts."""
    rows = np.flatnonzero(counts)
    return PassState(rows, sums[rows], counts[rows], stats, **parts)


def _shard(number: int) -> ShardState:
    shard = Shard(Position(0, number * 10, 1, 0), Position(0, number * 10 + 10, 1, 0))
    return ShardState.fresh(shard)


def test_a_state_keeps_the_entries_seen_only_and_knows_which_occur():
    state = _state_of_sums(
        np.array([[1.0, 1.0], [0, 0], [2, 2]]),
        np.array([1, 0, 2]),
        RunStats(tokens=4),
        shards=[replace(_shard(0), taken=EntryCounts.of([3, 3]))],
        seen=np.array([1]),
    )
    assert state.rows.tolist() == [0, 2]  # only the entries seen are kept
    sums, counts = state.dense(3)
    assert sums.tolist() == [[1, 1], [0, 0], [2, 2]] and counts.tolist() == [1, 0, 2]
    means, _ = state.means(3)
    assert means.dtype == np.float32 and means[2].tolist() == [1, 1]
    # Occurring: seen in a shard done, or taken in one being read (whether encoded or not).
    assert state.occurring(5).tolist() == [False, True, False, True, False]


def test_the_means_are_rounded_once_and_need_no_dense_float64_copy():
    rng = np.random.default_rng(0)
    entries, dim, rows = 50_000, 64, np.array([3, 17, 49_999])
    sums, counts = rng.normal(size=(3, dim)) * 1e3, np.array([7, 1, 3])
    state = PassState(rows, sums, counts)
    tracemalloc.start()
    try:
        means, dense_counts = state.means(entries)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The float32 means themselves, and nothing the size of the float64 sums of every entry.
    assert peak < entries * dim * 8 * 0.6
    assert means.dtype == np.float32 and not means[np.setdiff1d(np.arange(entries), rows)].any()
    expected = (sums / counts[:, None]).astype(np.float32)
    assert means[rows].tobytes() == expected.tobytes()
    assert dense_counts[rows].tolist() == [7, 1, 3] and dense_counts.sum() == 11


def test_entry_counts_add_up_whatever_entries_each_part_holds():
    a, b = EntryCounts.of([4, 1, 4]), EntryCounts.of([2, 4])
    both = a + b
    assert both.entries.tolist() == [1, 2, 4] and both.counts.tolist() == [1, 1, 3]
    assert both.dense(6).tolist() == [0, 1, 1, 0, 3, 0]
    assert len(EntryCounts.none() + a) == 2


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


@pytest.mark.parametrize("max_contexts", [0, 3])
def test_a_pass_over_many_shards_is_the_pass_over_the_whole_corpus(job, max_contexts):
    # One process reads the shards one after another: the pass loop, the quotas and the ledger
    # of many shards give what one shard gives.
    job = replace(job, config=job.config.replace(max_contexts=max_contexts))
    entries = len(job.vocab)
    whole = SerialEngine().run(job, None, None, lambda _: None)
    sharded = fresh_state(job.corpus, entries, job.dim, job.config, sharded=True)
    shards = plan_shards(job.corpus.files, shard_bytes=1_000)
    assert len(shards) > 2
    sharded.shards = [ShardState.fresh(shard) for shard in shards]
    merged = SerialEngine().run(job, sharded, None, lambda _: None)
    sums, counts = merged.dense(entries)
    expected_sums, expected_counts = whole.dense(entries)
    np.testing.assert_array_equal(counts, expected_counts)
    np.testing.assert_array_equal(merged.occurring(entries), whole.occurring(entries))
    # The encoder computes in float32, and batches may differ.
    np.testing.assert_allclose(sums, expected_sums, rtol=1e-6)
    assert all(shard.done and not len(shard.taken) for shard in merged.shards)
    merged_stats, whole_stats = asdict(merged.run_stats()), asdict(whole.run_stats())
    for key in (
        "text_units",
        "sentences",
        "sentences_encoded",
        "windows",
        "tokens",
    ):
        assert merged_stats[key] == whole_stats[key], key


def test_a_snapshot_of_the_encoders_sums_is_taken_under_their_lock(job):
    # The encoder threads add to their sums under the lock; a snapshot that read them after it
    # could hold part of a batch whose ticket it does not, and a resume would sum it twice.
    pool = EncoderThreads([job.encoder, job.encoder], len(job.vocab), job.dim, job.config)

    class BatchSummedOnRelease:
        """The lock, with a thread summing a batch the moment the snapshot lets it go."""

        def __enter__(self) -> None:
            lock.acquire()

        def __exit__(self, *_: object) -> None:
            lock.release()
            for accumulator in pool.accumulators:
                accumulator.sums += 100
                accumulator.counts += 100

    lock, pool.lock = pool.lock, BatchSummedOnRelease()
    try:
        for number, accumulator in enumerate(pool.accumulators, start=1):
            accumulator.sums += number
            accumulator.counts += number
        snapshot = pool.snapshot()
        assert (snapshot.sums == 3).all() and (snapshot.counts == 3).all()
    finally:
        pool.lock = lock
        pool.close()


def test_a_snapshot_holds_the_entries_summed_only_added_encoder_by_encoder(job):
    pool = EncoderThreads([job.encoder, job.encoder], len(job.vocab), job.dim, job.config)
    try:
        first, second = pool.accumulators
        first.sums[1], first.counts[1] = 0.1, 1
        second.sums[1], second.counts[1] = 0.2, 2
        second.sums[3], second.counts[3] = 0.3, 1
        snapshot = pool.snapshot()
    finally:
        pool.close()
    assert snapshot.rows.tolist() == [1, 3] and snapshot.counts.tolist() == [3, 1]
    assert snapshot.sums.shape == (2, job.dim)
    assert (snapshot.sums[0] == np.float64(0.1) + np.float64(0.2)).all()
    assert (snapshot.sums[1] == 0.3).all()


# --- the producer --------------------------------------------------------------------------


def test_the_producer_reads_a_shard_in_chunks_to_its_end_and_counts_what_it_takes(job):
    producer = replace(job, config=job.config.replace(chunk_sentences=2)).producer()
    shard = plan_shards(job.corpus.files, shard_bytes=1_000)[1]
    task = EncodeShard(1, ShardState.fresh(shard), np.full(len(job.vocab), 3))
    chunks = list(producer.chunks(task))
    assert len(chunks) > 1 and [c.done for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert task.state.stats == RunStats()  # the task's state is left as it was
    positions = [(c.position.offset, c.position.skip) for c in chunks]
    assert positions == sorted(positions) and shard.start.offset < positions[0][0]
    ends = [c.end_bytes for c in chunks]
    start, end = shard_bytes(job.corpus, shard)
    assert ends == sorted(ends) and ends[-1] == end - start
    taken = np.bincount(
        np.concatenate([i.occurrences[:, 2] for c in chunks for i in c.inputs]),
        minlength=len(job.vocab),
    )
    # At most 3 occurrences of each entry, each chunk saying which it took; the shard holds more.
    said = sum((c.taken for c in chunks), EntryCounts.none()).dense(len(job.vocab))
    assert (taken <= 3).all() and (said == taken).all()
    assert (producer.count(CountShard(1, shard)).counts.dense(len(job.vocab)) >= taken).all()
    assert 0 < chunks[-1].stats.sentences_encoded <= chunks[-1].stats.sentences


@pytest.mark.parametrize("sentence_targets", [0, 5])
def test_a_chunk_is_tokenized_a_few_sentences_at_a_time_into_the_inputs_of_one_call(
    job, monkeypatch, sentence_targets
):
    # A chunk's sentences held until the chunk is full took tens of MB per reading process; the
    # producer tokenizes a few at a time as they come, and the chunks must not change.
    config = job.config.replace(chunk_sentences=40, sentence_targets=sentence_targets)
    producer = replace(job, config=config).producer()
    calls: list[int] = []
    encode = producer.subwords.encode
    monkeypatch.setattr(
        producer.subwords, "encode", lambda s, t=None: calls.append(len(s)) or encode(s, t)
    )
    task = EncodeShard(0, ShardState.fresh(whole_corpus(job.corpus)))

    def chunks(at_once: int) -> list[Chunk]:
        monkeypatch.setattr(producer_module, "TOKENIZE_SENTENCES", at_once)
        calls.clear()
        return list(producer.chunks(task))

    whole = chunks(1_000)
    assert max(calls) > 3
    in_parts = chunks(3)
    assert max(calls) <= 3 and len(whole) == len(in_parts) > 2
    for one, other in zip(whole, in_parts, strict=True):
        assert one.stats == other.stats and one.position == other.position
        entries = len(job.vocab)
        np.testing.assert_array_equal(one.taken.dense(entries), other.taken.dense(entries))
        for a, b in zip(one.inputs, other.inputs, strict=True):
            np.testing.assert_array_equal(a.ids, b.ids)
            np.testing.assert_array_equal(a.occurrences, b.occurrences)
            assert (a.target is None) == (b.target is None)
            if a.target is not None:
                assert a.target.key == b.target.key
                np.testing.assert_array_equal(a.target.counts, b.target.counts)
    targets = [i.target for c in in_parts for i in c.inputs if i.target is not None]
    assert bool(targets) == bool(sentence_targets)


def test_counting_finds_every_occurrence_the_pass_takes_without_a_limit(job):
    producer = job.producer()
    state = fresh_state(job.corpus, len(job.vocab), job.dim, job.config, sharded=False)
    task = EncodeShard(0, state.shards[0])
    taken = np.bincount(
        np.concatenate([i.occurrences[:, 2] for c in producer.chunks(task) for i in c.inputs]),
        minlength=len(job.vocab),
    )
    counted = producer.count(CountShard(0, task.state.shard)).counts
    np.testing.assert_array_equal(counted.dense(len(job.vocab)), taken)


def test_a_producer_s_segmenter_keeps_within_its_strings_limit_and_reads_alike(
    job, tmp_path, monkeypatch
):
    lines = [f"the cat w{n}a w{n}b w{n}c sat by the river bank ." for n in range(3_000)]
    path = tmp_path / "open-vocabulary.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    task = EncodeShard(0, ShardState.fresh(whole_corpus(Corpus([path]))), None)

    def read(producer):
        chunks = list(producer.chunks(task))
        return producer, [(c.position, [i.ids.tolist() for i in c.inputs]) for c in chunks]

    unlimited, expected = read(replace(job, corpus=Corpus([path])).producer())
    monkeypatch.setattr("roberta_static.text.segment.STRINGS_BEFORE_RELOAD", 2_000)
    limited, chunks = read(replace(job, corpus=Corpus([path])).producer())
    assert chunks == expected
    assert len(unlimited.segmenter.nlp.vocab.strings) > 9_000
    assert len(limited.segmenter.nlp.vocab.strings) < 3_000


@pytest.mark.parametrize(
    ("allowance", "exhausted"),
    [
        (None, None),
        ([2, 2, 2, 0, 0], None),
        # Counted when the entries "river" and "bank" had their N: left out of the reading.
        ([NEVER, NEVER, NEVER, 0, 0], [False, False, False, True, True]),
    ],
)
def test_a_shard_replayed_from_its_counting_gives_the_chunks_its_reading_gives(
    job, tmp_path, allowance, exhausted
):
    # Counters of every kind: a binary file skipped, undecodable bytes, a line cut for length.
    (tmp_path / "a.txt").write_text("\n".join(CORPUS_LINES * 4) + "\n", encoding="utf-8")
    (tmp_path / "b.bin").write_bytes(b"the cat\0\0\n")
    (tmp_path / "c.txt").write_bytes(
        b"the dog \xff sat by the river bank\n" + b"x" * 300_000 + b"\n"
    )
    files = [tmp_path / name for name in ("a.txt", "b.bin", "c.txt")]
    config = job.config.replace(chunk_sentences=3)

    def producer():  # each as in a process of its own: the replay reads nothing
        return replace(job, corpus=Corpus(files), config=config).producer()

    shard = plan_shards(files, shard_bytes=10**9)[0]
    limit = None if allowance is None else np.array(allowance)
    task = EncodeShard(0, ShardState.fresh(shard), limit)
    left_out = None if exhausted is None else np.array(exhausted)
    counted = producer().count(CountShard(0, shard, left_out))
    # Counting alone (the Ray engine's, which reads the shard again) finds the same.
    alone = producer().count(CountShard(0, shard, left_out, keep_reading=False))
    assert alone.reading is None and counted.counts.counts.sum() > 0
    assert alone.counts.entries.tolist() == counted.counts.entries.tolist()
    assert alone.counts.counts.tolist() == counted.counts.counts.tolist()
    if left_out is not None:
        assert not set(counted.reading.spans[:, 2].tolist()) & {3, 4}
        assert counted.counts.entries.tolist() == [0, 1, 2]
    read = list(producer().chunks(task))
    replayed = list(producer().chunks(replace(task, reading=counted.reading)))
    assert len(replayed) == len(read) > (allowance is None)
    for a, b in zip(read, replayed, strict=True):
        assert (a.position, a.stats, a.done, a.end_bytes) == (
            b.position,
            b.stats,
            b.done,
            b.end_bytes,
        )
        assert a.taken.counts.tolist() == b.taken.counts.tolist()
        assert a.taken.entries.tolist() == b.taken.entries.tolist()
        assert [(i.ids.tolist(), i.occurrences.tolist()) for i in a.inputs] == [
            (i.ids.tolist(), i.occurrences.tolist()) for i in b.inputs
        ]
    stats = read[-1].stats
    if not stats.stopped_early:
        assert stats.binary_files_skipped and stats.bad_bytes and stats.lines_cut
    else:  # the entries that may take some have them within the first file
        assert stats.stopped_early and not stats.binary_files_skipped


def test_counting_keeps_every_entry_for_the_sentence_targets_which_name_them_all(job):
    shard = plan_shards(job.corpus.files, shard_bytes=10**9)[0]
    everything = np.ones(len(job.vocab), dtype=bool)
    targets = replace(job, config=job.config.replace(sentence_targets=10)).producer()
    kept = targets.count(CountShard(0, shard, everything))
    assert kept.counts.entries.tolist() == [0, 1, 2]  # the corpus holds no "river" or "bank"
    assert not len(job.producer().count(CountShard(0, shard, everything)).counts)


def _reading(entries: list[int]) -> ShardReading:
    """A shard's reading of one unit, one sentence holding ``entries``."""
    spans = np.array([[0, 1, entry] for entry in entries], dtype=np.int64).reshape(-1, 3)
    one = np.ones(1, dtype=np.int64)
    mark = (0, 0, 1, 1, 1, 0, 0, 0, 10)
    counts = np.array([len(entries)])
    return ShardReading(np.array([mark]), one, one, "x", one, counts, spans, mark, [])


def test_a_shard_counted_is_read_from_its_counting_once_its_own_counts_are_in():
    shards = [_shard(0), _shard(1), _shard(2)]
    schedule = Schedule(PassState.empty(2, shards, QuotaPlan.fresh(2, 2)))
    tasks = [schedule.next_task() for _ in range(3)]  # the first shard is read as it is counted
    assert [(type(task).__name__, task.shard) for task in tasks] == [
        ("EncodeShard", 0),
        ("CountShard", 0),
        ("CountShard", 1),  # the last shard is never counted
    ]
    assert tasks[0].reading is None and schedule.next_task() is None
    # Shard 0 is being read: its counting sends no reading back; shard 1's reading will replay.
    assert [task.keep_reading for task in tasks[1:]] == [False, True]
    schedule.counted(Counted(0, EntryCounts.of([0]), None))
    assert schedule.next_task() is None  # shard 1 is planned, but its own counting is out
    counted = _reading([0, 1])
    schedule.counted(Counted(1, counted.counts(), counted))
    read = schedule.next_task()
    assert isinstance(read, EncodeShard) and read.shard == 1
    assert read.reading.text == "x" and read.reading.counts().counts.tolist() == [1, 1]
    assert read.allowance.tolist() == [1, NEVER]  # entry 0's second occurrence is here
    last = schedule.next_task()
    assert isinstance(last, EncodeShard) and last.shard == 2 and last.reading is None
    assert schedule.readings == {}  # none is held once its shard is handed out


def test_a_pass_holds_no_reading_of_a_shard_it_reads_while_counting_it():
    # Reading keeps up with counting: each shard after those counted is read as it is counted.
    shards = [_shard(index) for index in range(6)]
    schedule = Schedule(PassState.empty(2, shards, QuotaPlan.fresh(2, 100)))
    read, kept = [], 0
    while schedule.reading:
        task = schedule.next_task()
        if isinstance(task, CountShard):
            reading = _reading([0]) if task.keep_reading else None
            kept += reading is not None
            schedule.counted(Counted(task.shard, EntryCounts.of([0]), reading))
        elif task is not None:
            read.append((task.shard, task.reading is not None))
            schedule.finished()
    assert [shard for shard, _ in read] == list(range(6))
    assert kept == sum(replayed for _, replayed in read) and schedule.readings == {}


def test_a_resumed_shard_half_read_reads_on_from_its_position_though_counted():
    shards = [_shard(0), _shard(1)]
    shards[0].position = Position(0, 14, 2, 1)
    schedule = Schedule(PassState.empty(2, shards, QuotaPlan.fresh(2, 5)))
    assert isinstance(schedule.next_task(), EncodeShard)
    count = schedule.next_task()
    assert isinstance(count, CountShard) and count.shard == 0 and not count.keep_reading


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_chunk_crosses_a_process_boundary_as_it_was(count):
    import pickle

    inputs = [
        EncoderInput(np.arange(3 + i), np.array([[1, 2, i]] * (i % 2 + 1))) for i in range(count)
    ]
    position = Position(0, 14, 2, 1)
    chunk = Chunk(3, inputs, position, RunStats(sentences=5), EntryCounts.of([1, 1]), True, 42)
    back = pickle.loads(pickle.dumps(chunk))
    assert (back.shard, back.end_bytes, back.position, back.done) == (3, 42, position, True)
    assert back.stats == chunk.stats and back.taken.counts.tolist() == [2]
    assert len(back.inputs) == count
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
    shards = [_shard(0), _shard(1), _shard(2)]
    shards[0].done, shards[0].stats = True, RunStats(sentences=7, binary_files_skipped=["x.bin"])
    shards[1].position, shards[1].taken = Position(0, 14, 2, 1), EntryCounts.of([0, 2, 2])
    shards[1].leftover = inputs
    quotas = QuotaPlan.fresh(3, 4)
    quotas.add(EntryCounts.of([0, 0, 0, 0, 2]))
    state = _state_of_sums(
        np.array([[0.5, 1.5], [0, 0], [2, 2]]),
        np.array([1, 0, 3]),
        RunStats(tokens=9, seconds=1.5),
        shards=shards,
        seen=np.array([0, 1]),
        quotas=quotas,
    )
    files = FileList(["/a.txt", "/b/ünï\udcff.txt", "/c.txt"])  # an undecodable name too
    identity = CorpusIdentity(files[:2], array("q", [12, 3]), bytes(range(64)), reading=True)
    written = Checkpoint({"model": "m"}, files, identity, ["x", "y", "z"], {"counted": 0}, state)
    save_checkpoint(tmp_path, written)
    read = load_checkpoint(str(tmp_path))  # a path as a string too
    assert (read.config, read.files, read.corpus, read.entries, read.vocabulary) == (
        written.config,
        written.files,
        written.corpus,
        written.entries,
        written.vocabulary,
    )
    for name in ("rows", "sums", "counts", "seen"):
        np.testing.assert_array_equal(getattr(read.state, name), getattr(state, name))
    assert read.state.stats == state.stats
    got_quotas = read.state.quotas
    assert (got_quotas.limit, got_quotas.counted) == (4, 1)
    for name in ("reached_in", "last_quota", "before"):
        np.testing.assert_array_equal(getattr(got_quotas, name), getattr(quotas, name))
    for got, want in zip(read.state.shards, shards, strict=True):
        assert (got.shard, got.position, got.stats, got.done) == (
            want.shard,
            want.position,
            want.stats,
            want.done,
        )
        np.testing.assert_array_equal(got.taken.entries, want.taken.entries)
        np.testing.assert_array_equal(got.taken.counts, want.taken.counts)
        assert len(got.leftover) == len(want.leftover)
        for a, b in zip(got.leftover, want.leftover, strict=True):
            for name in asdict(a):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("name", ["sums.npy", "taken.npz", "corpus.npz"])
def test_a_pickled_array_in_a_checkpoint_is_never_unpickled(tmp_path, name):
    state = _state_of_sums(np.ones((1, 2)), np.array([1]), RunStats(), shards=[_shard(0)])
    target = save_checkpoint(tmp_path, _one_file_checkpoint({}, ["x"], state))
    planted = np.array([object()] * 2)
    if name.endswith(".npz"):
        with np.load(target / name) as saved:
            names = list(saved)
        np.savez(target / name, **dict.fromkeys(names, planted), allow_pickle=True)
    else:
        np.save(target / name, planted, allow_pickle=True)
    with pytest.raises(ConfigError, match="unreadable checkpoint .*allow_pickle=False"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("name", ["corpus.npz", "taken.npz", "leftover.npz"])
def test_a_damaged_checkpoint_archive_is_one_line(tmp_path, name):
    state = _state_of_sums(np.ones((1, 2)), np.array([1]), RunStats(), shards=[_shard(0)])
    target = save_checkpoint(tmp_path, _one_file_checkpoint({}, ["x"], state))
    (target / name).write_bytes((target / name).read_bytes()[:100])  # cut short
    with pytest.raises(ConfigError, match=f"{target}: unreadable checkpoint"):
        load_checkpoint(tmp_path)


def _one_file_checkpoint(config: dict, entries: list[str], state: PassState) -> Checkpoint:
    """A checkpoint of ``state`` over one corpus file, read to its end."""
    files = FileList(["/a.txt"])
    identity = CorpusIdentity(files, array("q", [5]), bytes(32))
    return Checkpoint(config, files, identity, entries, {}, state)


def _checkpoint_sizes(folder, shards: int, entries: int) -> dict[str, int]:
    """Bytes of each file of a checkpoint of ``shards`` half-read shards, each having taken the
    same three entries, in a pass over ``entries`` entries capped per entry."""
    states = [_shard(number) for number in range(shards)]
    for state in states:
        state.position, state.taken = Position(0, 3, 1, 0), EntryCounts.of([1, 2, 2])
    quotas = QuotaPlan.fresh(entries, 4)
    state = _state_of_sums(
        np.ones((3, 8)), np.array([1, 2, 3]), RunStats(), shards=states, seen=np.array([0]),
        quotas=quotas,
    )  # fmt: skip
    words = [f"w{number}" for number in range(entries)]
    target = save_checkpoint(folder, _one_file_checkpoint({"model": "m"}, words, state))
    return {path.name: path.stat().st_size for path in target.iterdir()}


def test_the_state_of_the_shards_does_not_grow_with_the_vocabulary(tmp_path):
    # A structural check of what issue "Real corpora on every engine" fixed: each shard held
    # dense arrays over the vocabulary, so a checkpoint grew as shards x entries.
    small = _checkpoint_sizes(tmp_path / "a", shards=200, entries=10)
    large = _checkpoint_sizes(tmp_path / "b", shards=200, entries=100_000)
    for name in ("taken.npz", "state.json", "leftover.npz", "rows.npy", "sums.npy"):
        assert large[name] == small[name], name
    # The vocabulary (entries.txt) and the per-entry quota record are kept once per run, not
    # once per shard.
    few = _checkpoint_sizes(tmp_path / "c", shards=2, entries=100_000)
    assert large["quotas.npz"] == few["quotas.npz"]
    assert sum(large.values()) - sum(few.values()) < 200 * 2_000  # about a kB a shard


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
    """A producer whose chunks are the values ``items`` yields, each wrapped as a chunk."""

    def __init__(self, items) -> None:
        self.items = items

    def chunks(self, task):
        for value in self.items():
            yield _Chunk(value)


class _Chunk:
    def __init__(self, value) -> None:
        self.value, self.taken, self.done = value, EntryCounts.none(), value == "end"


def _task() -> EncodeShard:
    return EncodeShard(0, _shard(0))


def _receive(feeder: ThreadFeeder):
    while (message := feeder.receive(0.1)) is None:
        pass
    return message.value


def _receive_all(feeder: ThreadFeeder) -> list:
    got = []
    while (value := _receive(feeder)) != "end":
        got.append(value)
    return [*got, "end"]


def test_the_producer_thread_keeps_order_and_runs_in_its_own_thread():
    threads = set()

    def items():
        for i in range(50):
            threads.add(threading.current_thread().name)
            yield i
        yield "end"

    with ThreadFeeder(_Producer(items)) as feeder:
        feeder.submit(_task())
        assert _receive_all(feeder) == [*range(50), "end"]
    assert threads == {"roberta-static-producer"}


def test_an_error_in_the_producer_thread_is_raised_by_receive_as_one_line():
    def items():
        yield 1
        raise ValueError("bad chunk")

    with ThreadFeeder(_Producer(items)) as feeder:
        feeder.submit(_task())
        assert _receive(feeder) == 1
        with pytest.raises(CorpusError, match="worker failed: ValueError: bad chunk"):
            _receive(feeder)


def test_a_closed_producer_thread_stops_without_anyone_waiting_for_its_chunk_in_hand():
    produced, release = [], threading.Event()

    def items():
        for i in range(10_000):
            produced.append(i)
            if i == 3:
                release.wait(30)  # a chunk that takes long to make
            yield i

    with ThreadFeeder(_Producer(items)) as feeder:
        feeder.submit(_task())
        assert _receive(feeder) == 0
        while len(produced) < 4:  # the thread makes chunk 3, the queue ahead of it full
            release.wait(0.01)
    # Closed while its thread makes a chunk: the close returned at once.
    assert feeder.thread.is_alive(), "the close waited for the producer"
    release.set()
    feeder.thread.join(timeout=10)
    assert not feeder.thread.is_alive() and len(produced) <= 6
