"""The numpy boundary between the CPU side and the encoder: inputs, padded batches, counters.

Plain data and numpy only, so worker processes, checkpoints and Ray send them cheaply.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TargetSentence:
    """A sentence that may become a sentence target: its sampling key and the entries it holds.

    Attributes:
        key: Its sampling key (:func:`~roberta_static.vectors.targets.sentence_key`).
        entries: The vocabulary entries occurring in it, ascending.
        counts: How often each occurs.

    """

    key: int
    entries: np.ndarray
    counts: np.ndarray


@dataclass
class EncoderInput:
    """One encoder input: token ids with special tokens, and the occurrences to read from it.

    Attributes:
        ids: Token ids, special tokens included.
        occurrences: ``[k, 3]`` int64 rows of ``(first_token, end_token, entry_id)``.
        target: The whole sentence the input holds, when the teacher's vector of it is wanted.

    """

    ids: np.ndarray
    occurrences: np.ndarray
    target: TargetSentence | None = None


def pack_inputs(inputs: Sequence[EncoderInput]) -> dict[str, np.ndarray]:
    """Encoder inputs as flat arrays: token ids and occurrences with their lengths, and targets.

    What crosses a process boundary or goes into a checkpoint: a few arrays pickle or save in a
    fraction of the time two arrays per input take.
    """
    targets = [(number, item.target) for number, item in enumerate(inputs) if item.target]
    return {
        "ids": np.concatenate([item.ids for item in inputs] or [np.zeros(0, np.int64)]),
        "lengths": np.array([len(item.ids) for item in inputs], dtype=np.int64),
        "occurrences": np.concatenate(
            [item.occurrences for item in inputs] or [np.zeros((0, 3), np.int64)]
        ),
        "counts": np.array([len(item.occurrences) for item in inputs], dtype=np.int64),
        "target_inputs": np.array([number for number, _ in targets], dtype=np.int64),
        "target_keys": np.array([target.key for _, target in targets], dtype=np.uint64),
        "target_sizes": np.array([len(target.entries) for _, target in targets], dtype=np.int64),
        "target_entries": np.concatenate(
            [target.entries for _, target in targets] or [np.zeros(0, np.int64)]
        ),
        "target_counts": np.concatenate(
            [target.counts for _, target in targets] or [np.zeros(0, np.int64)]
        ),
    }


def unpack_inputs(arrays: Mapping[str, np.ndarray]) -> list[EncoderInput]:
    """The inputs :func:`pack_inputs` packed (views of its arrays)."""
    ids, occurrences = arrays["ids"], arrays["occurrences"]
    # Slices at Python ints take a third of np.split's time: the encoder's process spends it on
    # every chunk a worker sends.
    ends = np.cumsum(arrays["lengths"]).tolist()
    last = np.cumsum(arrays["counts"]).tolist()
    inputs = [  # the start lists are one longer than the ends: zip stops at the last input
        EncoderInput(ids[start:end], occurrences[first:stop])
        for start, end, first, stop in zip([0, *ends], ends, [0, *last], last, strict=False)
    ]
    bounds = np.cumsum(arrays["target_sizes"]).tolist()
    entries, counts = arrays["target_entries"], arrays["target_counts"]
    for number, key, start, end in zip(
        arrays["target_inputs"].tolist(),
        arrays["target_keys"].tolist(),
        [0, *bounds],
        bounds,
        strict=False,
    ):
        inputs[number].target = TargetSentence(key, entries[start:end], counts[start:end])
    return inputs


@dataclass
class BatchTargets:
    """The rows of a batch that hold sentence targets, with their keys and entries.

    Attributes:
        rows: Each target's batch row.
        keys: Its sampling key (``uint64``).
        indptr: Target ``i``'s entries are ``entries[indptr[i]:indptr[i + 1]]``.
        entries, counts: The entries occurring in each target sentence, and how often.

    """

    rows: np.ndarray
    keys: np.ndarray
    indptr: np.ndarray
    entries: np.ndarray
    counts: np.ndarray


@dataclass
class Batch:
    """A padded batch and its occurrences, as numpy arrays (the encoder moves them to the device).

    Attributes:
        input_ids: ``[B, T]`` token ids, right-padded.
        attention_mask: ``[B, T]`` 1 for real tokens.
        rows, starts, ends, entries: One value per occurrence: its batch row, token range, entry.
        targets: The rows whose sentences may become sentence targets, if any.

    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    entries: np.ndarray
    targets: BatchTargets | None = None

    @property
    def real_tokens(self) -> int:
        """Tokens that are not padding."""
        return int(self.attention_mask.sum())


@dataclass
class EncodeStats:
    """Counters of the encoding step."""

    sentences_encoded: int = 0
    windows: int = 0
    split_sentences: int = 0
    occurrences_without_subwords: int = 0
    occurrences_too_long: int = 0


def make_batches(
    inputs: Sequence[EncoderInput], batch_tokens: int, pad_id: int, max_padding: float = 0.1
) -> Iterator[Batch]:
    """Group inputs into padded batches, shortest first (see :func:`batch_groups`)."""
    for group in batch_groups(inputs, batch_tokens, max_padding):
        yield _pad([inputs[i] for i in group], pad_id)


def batch_groups(
    inputs: Sequence[EncoderInput], batch_tokens: int, max_padding: float = 0.1
) -> Iterator[list[int]]:
    """The indices of ``inputs`` that make each batch, shortest first (:func:`length_runs`)."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, item in enumerate(inputs):
        by_length[len(item.ids)].append(index)
    counts = {length: len(indices) for length, indices in by_length.items()}
    for runs in length_runs(counts, batch_tokens, max_padding):
        yield [index for length, begin, end in runs for index in by_length[length][begin:end]]


Run = tuple[int, int, int]  # (length, begin, end): inputs begin to end of those of that length


def length_runs(
    counts: Mapping[int, int], batch_tokens: int, max_padding: float = 0.1
) -> Iterator[list[Run]]:
    """Batches of inputs, shortest first, from how many inputs there are of each length.

    A batch holds at most ``batch_tokens`` tokens, padding included, and at most a ``max_padding``
    share of padding: inputs are taken by length, in their order within a length, and a longer
    one starts a new batch when padding the batch to its length would pass either limit. Each
    batch is given as runs of inputs of one length; inputs of one length add no padding, so the
    cost follows the lengths and batches, not the inputs.
    """
    runs: list[Run] = []
    size = real = 0
    for length in sorted(counts):
        begin, count = 0, counts[length]
        while begin < count:
            padded = (size + 1) * length
            if runs and (padded > batch_tokens or size * length - real > max_padding * padded):
                yield runs
                runs, size, real = [], 0, 0
            end = min(count, begin + max(1, batch_tokens // length - size))  # over it: alone
            runs.append((length, begin, end))
            size += end - begin
            real += length * (end - begin)
            begin = end
    if runs:
        yield runs


def padded(inputs: Sequence[EncoderInput], pad_id: int) -> Batch:
    """One padded batch of ``inputs``."""
    return _pad(list(inputs), pad_id)


def _pad(group: list[EncoderInput], pad_id: int) -> Batch:
    lengths = np.fromiter((len(item.ids) for item in group), np.int64, len(group))
    real = np.arange(lengths.max()) < lengths[:, None]
    input_ids = np.full(real.shape, pad_id, dtype=np.int64)
    input_ids[real] = np.concatenate([item.ids for item in group])  # row by row, in order
    occurrences = np.concatenate([item.occurrences for item in group])
    rows = np.repeat(np.arange(len(group)), [len(item.occurrences) for item in group])
    attention_mask = real.astype(np.int64)
    return Batch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        rows=rows,
        starts=occurrences[:, 0],
        ends=occurrences[:, 1],
        entries=occurrences[:, 2],
        targets=_targets(group),
    )


def _targets(group: list[EncoderInput]) -> BatchTargets | None:
    """The batch rows of ``group`` that hold sentence targets."""
    held = [(row, item.target) for row, item in enumerate(group) if item.target is not None]
    if not held:
        return None
    sizes = [len(target.entries) for _, target in held]
    return BatchTargets(
        rows=np.array([row for row, _ in held], dtype=np.int64),
        keys=np.array([target.key for _, target in held], dtype=np.uint64),
        indptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        entries=np.concatenate([target.entries for _, target in held]).astype(np.int64),
        counts=np.concatenate([target.counts for _, target in held]).astype(np.int64),
    )
