"""Encoder batches from the inputs of many chunks, of any shard: as full as the budget allows."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from ..model.batches import Batch, EncoderInput, Run, length_runs, padded

# Inputs whose batch is not full wait for more while they hold at most this many batches' worth
# of tokens (see Batcher): enough for a length's batch to fill, little left for the end ...
HOLD_BATCHES = 4
# ... and at least this many tokens. A batch fills from inputs of its lengths only (some 40
# groups span sentence lengths at 10% padding), so a small budget's 4 batches fill few: worker
# processes hand over smaller chunks than one process, and their batches would come out less
# full than its. A GPU's budget is past it.
HOLD_MIN_TOKENS = 131_072
# ... and until this many times as many tokens have come after them: the ledger keeps every
# chunk from the oldest one not summed on, so a wait without this bound kept the whole corpus.
HOLD_AGE = 2


class Pooled(Protocol):
    """What a :class:`Batcher` takes: a chunk of encoder inputs (of any shard)."""

    inputs: list[EncoderInput]


C = TypeVar("C", bound=Pooled)


class Batcher(Generic[C]):
    """Encoder batches from the inputs of the chunks handed over, with the inputs each holds.

    Inputs of any chunk (and, with worker processes or Ray, of any shard) wait together, grouped
    by length as :func:`~..model.batches.length_runs` groups them. A group goes to the encoder
    once full (another input as long as its longest would pass the token budget); the others
    wait for more inputs, the largest going first whenever together they hold more than
    ``hold_tokens`` real tokens (a pass's are :meth:`for_budget`'s). A group also goes once
    ``HOLD_AGE`` times ``hold_tokens`` have come after an input of it: a chunk leaves memory only
    once every input before it is summed. A chunk holds inputs of every length, so its inputs
    alone would fill few groups of a large budget. What waits is bounded by ``hold_tokens``, and
    so is what the encoder has left once the corpus is read. Which inputs make a batch depends
    only on the order they arrive in, so a run in one process makes the same batches, and sums,
    every time.
    """

    def __init__(self, batch_tokens: int, pad_id: int, hold_tokens: int) -> None:
        self.batch_tokens, self.pad_id, self.hold_tokens = batch_tokens, pad_id, hold_tokens
        self.waiting: dict[int, list[tuple[C, int]]] = {}  # input length: (chunk, input number)
        self.arrivals: dict[int, list[int]] = {}  # input length: tokens handed over with each
        self.added = 0  # tokens handed over so far

    @classmethod
    def for_budget(cls, batch_tokens: int, pad_id: int) -> Batcher:
        """The batcher of a pass whose batches hold ``batch_tokens`` (see ``HOLD_BATCHES``)."""
        return cls(batch_tokens, pad_id, max(HOLD_BATCHES * batch_tokens, HOLD_MIN_TOKENS))

    @property
    def pool(self) -> list[tuple[C, int]]:
        """The inputs waiting, as (chunk, input number)."""
        return [member for members in self.waiting.values() for member in members]

    def add(self, chunk: C, flush: bool = False) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """The batches ready once ``chunk`` is in (with ``flush``, of every input waiting)."""
        self.added += sum(len(item.ids) for item in chunk.inputs)
        for number, item in enumerate(chunk.inputs):
            self.waiting.setdefault(len(item.ids), []).append((chunk, number))
            self.arrivals.setdefault(len(item.ids), []).append(self.added)
        return self._batches(hold=not flush)

    def flush(self) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """Batches of every input waiting."""
        return self._batches(hold=False)

    def _batches(self, hold: bool) -> list[tuple[Batch, list[tuple[C, int]]]]:
        counts = {length: len(members) for length, members in self.waiting.items()}
        groups = list(length_runs(counts, self.batch_tokens))
        going = [not hold or self._ready(group) for group in groups]
        ready = [group for group, goes in zip(groups, going, strict=True) if goes]
        left = sorted((g for g, goes in zip(groups, going, strict=True) if not goes), key=_tokens)
        held = sum(_tokens(group) for group in left)
        while left and held > self.hold_tokens:  # the largest go first: fuller batches
            held -= _tokens(left[-1])
            ready.append(left.pop())
        waiting, arrivals = self.waiting, self.arrivals
        self.waiting, self.arrivals = {}, {}
        for length, begin, end in (run for group in left for run in group):
            self.waiting.setdefault(length, []).extend(waiting[length][begin:end])
            self.arrivals.setdefault(length, []).extend(arrivals[length][begin:end])
        batches = []
        for group in ready:
            members = [m for length, begin, end in group for m in waiting[length][begin:end]]
            inputs = [chunk.inputs[number] for chunk, number in members]
            batches.append((padded(inputs, self.pad_id), members))
        return batches

    def _ready(self, group: list[Run]) -> bool:
        """Whether the group is full, or holds an input that has waited long (see the class)."""
        length = group[-1][0]
        if (sum(end - begin for _, begin, end in group) + 1) * length > self.batch_tokens:
            return True
        oldest = min(self.arrivals[length][begin] for length, begin, _ in group)
        return self.added - oldest > HOLD_AGE * self.hold_tokens


def _tokens(group: list[Run]) -> int:
    """Real tokens of a group of runs."""
    return sum(length * (end - begin) for length, begin, end in group)
