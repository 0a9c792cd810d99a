from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from roberta_static.engine.batcher import Batcher
from roberta_static.model.batches import EncoderInput, batch_groups, make_batches, padded
from roberta_static.model.subwords import (
    SubwordEncoder,
    choose_windows,
    locate_subwords,
    window_starts,
)
from roberta_static.text.vocab import MatchedSentence


def test_locate_subwords_overlap_and_zero_width_markers():
    # "Ġ" split off before "big" has zero width; it belongs to the word after it.
    offsets = np.array([(1, 5), (6, 8), (9, 9), (9, 10), (10, 12), (12, 13)])
    spans = np.array([(0, 5, 7), (9, 12, 8), (13, 14, 9)])
    assert locate_subwords(offsets, spans).tolist() == [[0, 1, 7], [2, 5, 8], [6, 6, 9]]


@pytest.mark.parametrize("n_tokens,window", [(5, 10), (10, 10), (11, 10), (57, 10), (100, 7)])
def test_windows_cover_every_token_within_bounds(n_tokens, window):
    starts = window_starts(n_tokens, window)
    covered = set()
    for start in starts:
        assert 0 <= start and start + min(window, n_tokens) <= n_tokens
        covered.update(range(start, start + window))
    assert covered >= set(range(n_tokens))


def test_choose_windows_picks_most_central_and_flags_too_long():
    starts = [0, 5, 10]
    occurrences = np.array([(1, 2, 0), (8, 9, 0), (14, 15, 0), (0, 20, 0)])
    assert choose_windows(occurrences, starts, 10).tolist() == [0, 1, 2, -1]


def test_roberta_word_has_same_subwords_at_start_and_mid_sentence(roberta_dir):
    tokenizer = AutoTokenizer.from_pretrained(roberta_dir)
    encoder = SubwordEncoder(tokenizer.backend_tokenizer, 64, tokenizer.pad_token_id)
    sentences = [
        MatchedSentence("Paris is large.", [(0, 5, 0)]),
        MatchedSentence("I like Paris.", [(7, 12, 0)]),
        MatchedSentence("zebra here", [(0, 5, 1)]),
        MatchedSentence("a zebra", [(2, 7, 1)]),
        MatchedSentence("a b", [(0, 1, 2)]),
        MatchedSentence("b a", [(2, 3, 2)]),
    ]
    inputs = encoder.encode(sentences)
    pieces = [item.ids[item.occurrences[0, 0] : item.occurrences[0, 1]].tolist() for item in inputs]
    assert pieces[0] == pieces[1] and pieces[2] == pieces[3] and pieces[4] == pieces[5]
    assert len(pieces[0]) >= 2 and len(pieces[2]) >= 2  # multi-subword words
    assert pieces[0] == tokenizer(" Paris", add_special_tokens=False)["input_ids"]
    # The caller's tokenizer is not changed.
    assert tokenizer("Paris", add_special_tokens=False)["input_ids"] != pieces[0]


def test_the_encoder_neither_pads_nor_truncates_and_leaves_the_callers_tokenizer_as_it_was(
    roberta_dir,
):
    backend = Tokenizer.from_str(
        AutoTokenizer.from_pretrained(roberta_dir).backend_tokenizer.to_str()
    )
    backend.enable_truncation(3)
    backend.enable_padding(length=40, pad_id=1)
    encoder = SubwordEncoder(backend, 64, pad_id=1)
    [item] = encoder.encode([MatchedSentence("Paris is large and old.", [(19, 22, 0)])])
    assert 1 not in item.ids.tolist() and len(item.ids) > 5
    first, end, _ = item.occurrences[0]
    assert end > first  # the last word kept its subwords
    assert backend.truncation["max_length"] == 3 and backend.padding["length"] == 40


def test_make_batches_respect_budget_and_keep_every_input():
    inputs = [
        EncoderInput(np.arange(n, dtype=np.int64), np.array([[0, 1, i]]))
        for i, n in enumerate([3, 9, 5, 2, 8])
    ]
    batches = list(make_batches(inputs, batch_tokens=16, pad_id=-1))
    assert all(b.input_ids.size <= 16 for b in batches)
    assert sorted(e for b in batches for e in b.entries.tolist()) == [0, 1, 2, 3, 4]
    assert sum(b.real_tokens for b in batches) == 27


class Chunk:
    def __init__(self, *lengths: int) -> None:
        self.inputs = [EncoderInput(np.full(n, n), np.zeros((0, 3), np.int64)) for n in lengths]


def test_the_batcher_sends_a_full_batch_at_once_from_inputs_of_several_chunks():
    batcher = Batcher(batch_tokens=40, pad_id=0, hold_tokens=100)
    first, second = Chunk(10, 10, 10), Chunk(5, 10)
    assert batcher.add(first) == []  # 3 x 10 tokens: a fourth of that length still fits
    (batch,) = batcher.add(second)  # 4 x 10: full
    assert batch[1] == [(first, 0), (first, 1), (first, 2), (second, 1)]
    assert batch[0].input_ids.shape == (4, 10)
    assert batcher.pool == [(second, 0)]
    (rest,) = batcher.flush()
    assert rest[1] == [(second, 0)] and batcher.pool == []


def test_the_batcher_holds_at_most_its_bound_and_lets_the_largest_go_first():
    batcher = Batcher(batch_tokens=40, pad_id=0, hold_tokens=12)
    short, longer = Chunk(3, 3, 3), Chunk(7, 7)
    assert batcher.add(short) == []  # 9 tokens wait
    (batch,) = batcher.add(longer)  # 9 + 14 would pass 12: the 14 go
    assert batch[1] == [(longer, 0), (longer, 1)]
    assert batcher.pool == [(short, 0), (short, 1), (short, 2)]
    (rest,) = batcher.add(Chunk(), flush=True)
    assert rest[1] == [(short, 0), (short, 1), (short, 2)] and batcher.pool == []


def test_a_padded_batch_holds_each_input_in_its_row_and_marks_the_rest_padding():
    inputs = [
        EncoderInput(np.array([5, 6, 7]), np.array([[0, 2, 1]])),
        EncoderInput(np.array([8]), np.zeros((0, 3), dtype=np.int64)),
        EncoderInput(np.array([9, 10]), np.array([[0, 1, 0], [1, 2, 2]])),
    ]
    batch = padded(inputs, pad_id=-1)
    assert batch.input_ids.tolist() == [[5, 6, 7], [8, -1, -1], [9, 10, -1]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert batch.rows.tolist() == [0, 2, 2]
    assert batch.starts.tolist() == [0, 0, 1] and batch.ends.tolist() == [2, 1, 2]
    assert batch.entries.tolist() == [1, 0, 2]


def test_an_input_whose_batch_never_fills_waits_a_bounded_number_of_tokens():
    # A chunk leaves memory only once every input before it is summed: an input of a rare
    # length waiting for the corpus's end would keep the whole corpus.
    from roberta_static.engine.batcher import HOLD_AGE

    batcher = Batcher(batch_tokens=40, pad_id=0, hold_tokens=100)
    rare = Chunk(3)
    assert batcher.add(rare) == []
    for _ in range(HOLD_AGE * 100 // 40):  # 40 tokens a chunk, full batches: the 3 waits
        assert batcher.add(Chunk(10, 10, 10, 10)) != []
        assert (rare, 0) in batcher.pool
    batcher.add(Chunk(10, 10, 10, 10))  # more than HOLD_AGE x 100 tokens came after it
    assert (rare, 0) not in batcher.pool


def test_inputs_in_small_chunks_make_batches_about_as_full_as_in_large_ones():
    # Worker processes hand over a shard's chunks, smaller than one process's: the batcher a
    # pass builds holds enough inputs that their batches are about as full (4 batches' worth
    # held made them 0.76x as full with the CPU's budget).
    rng = random.Random(0)
    lengths = [min(200, max(4, int(rng.lognormvariate(3.1, 0.5)))) for _ in range(16 * 2048)]

    def mean_batch(size: int) -> float:
        batcher = Batcher.for_budget(8192, pad_id=0)
        chunks = [Chunk(*lengths[i : i + size]) for i in range(0, len(lengths), size)]
        sizes = [
            batch.real_tokens
            for number, chunk in enumerate(chunks)
            for batch, _ in batcher.add(chunk, flush=number == len(chunks) - 1)
        ]
        return sum(sizes) / len(sizes)

    assert mean_batch(512) >= 0.9 * mean_batch(2048)


def one_input_at_a_time(lengths: list[int], batch_tokens: int, max_padding: float) -> list:
    """Groups as a loop over the inputs sorted by length makes them: what batch_groups keeps."""
    groups, group, real = [], [], 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        width = lengths[i]
        padded = (len(group) + 1) * width
        if group and (padded > batch_tokens or padded - real - width > max_padding * padded):
            groups.append(group)
            group, real = [], 0
        group.append(i)
        real += width
    return groups + [group] if group else groups


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 80), max_size=120),
    batch_tokens=st.integers(1, 400),
    max_padding=st.sampled_from([0.0, 0.1, 0.3]),
)
def test_grouping_by_length_gives_the_groups_of_a_loop_over_the_inputs(
    lengths, batch_tokens, max_padding
):
    inputs = [EncoderInput(np.zeros(n, np.int64), np.zeros((0, 3), np.int64)) for n in lengths]
    groups = list(batch_groups(inputs, batch_tokens, max_padding))
    assert groups == one_input_at_a_time(lengths, batch_tokens, max_padding)


def test_batches_keep_padding_under_the_bound():
    lengths = [10, 10, 11, 12, 20, 21, 22, 60, 61, 100]
    inputs = [
        EncoderInput(np.arange(n, dtype=np.int64), np.array([[0, 1, i]]))
        for i, n in enumerate(lengths)
    ]
    batches = list(make_batches(inputs, batch_tokens=10_000, pad_id=-1, max_padding=0.1))
    shapes = [b.input_ids.shape for b in batches]
    assert shapes == [(3, 11), (1, 12), (3, 22), (2, 61), (1, 100)]
    assert all(1 - b.real_tokens / b.input_ids.size <= 0.1 for b in batches)
    # Without the bound, the budget alone decides: one batch padded to the longest input.
    (single,) = make_batches(inputs, batch_tokens=10_000, pad_id=-1, max_padding=1.0)
    assert single.input_ids.shape == (10, 100)


def test_a_zero_width_last_token_stays_in_its_own_sentence():
    # Two sentences laid end to end; the first ends with a zero-width marker.
    offsets = np.array([(0, 3), (4, 4), (10, 13), (14, 16)])
    spans = np.array([(4, 5, 0), (10, 13, 1)])
    located = locate_subwords(offsets, spans, last_tokens=np.array([1, 3]))
    assert located.tolist() == [[1, 2, 0], [2, 3, 1]]
    # As one sentence, the marker belongs to the word after it instead.
    assert locate_subwords(offsets, spans).tolist() == [[1, 1, 0], [1, 3, 1]]


_PIECES = ["cat", "Paris", "zebra", " ", "  ", "\n", ".", "é", "🙂", "a", "the", "-", "\u200b"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_chunk_encodes_as_its_sentences_would_one_by_one(model_dir, data):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    max_length = data.draw(st.sampled_from([8, 12, 64]))  # small: long sentences get windows
    sentences = []
    for _ in range(data.draw(st.integers(1, 6))):
        text = "".join(data.draw(st.lists(st.sampled_from(_PIECES), max_size=25)))
        bounds = st.integers(0, len(text))
        spans = sorted(
            (min(a, b), max(a, b), entry)
            for a, b, entry in data.draw(st.lists(st.tuples(bounds, bounds, st.integers(0, 3))))
        )
        sentences.append(MatchedSentence(text, spans))
    together = SubwordEncoder(tokenizer.backend_tokenizer, max_length, tokenizer.pad_token_id)
    alone = SubwordEncoder(tokenizer.backend_tokenizer, max_length, tokenizer.pad_token_id)
    expected = [item for sentence in sentences for item in alone.encode([sentence])]
    inputs = together.encode(sentences)
    assert [(i.ids.tolist(), i.occurrences.tolist()) for i in inputs] == [
        (i.ids.tolist(), i.occurrences.tolist()) for i in expected
    ]
    assert together.stats == alone.stats
