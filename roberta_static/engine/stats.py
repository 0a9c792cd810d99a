"""Run statistics: what a pass read, skipped and computed; mergeable across shards."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class RunStats:
    """What one run read, skipped and computed; written to ``meta.json``.

    ``entries_not_found`` lists the vocabulary entries that never occur in the corpus;
    ``entries_not_encoded`` those that occur, but never in a form the encoder could read (each
    occurrence longer than the model's input window, or without subwords). Neither has a
    contextual vector; ``fill_unseen`` may still give them one. ``paths_skipped`` names what the
    corpus folders hold that was not read, with why (see ``text.files.CorpusFiles``).
    ``batches`` counts the encoder's batches; ``encoder_wait_seconds`` the time the encoder side
    waited for a batch to arrive (summed over encoders): a large share of ``seconds`` means the
    CPU side cannot keep the encoder busy. ``lines_cut`` counts the corpus lines longer than a
    text unit's limit (``text.corpus.MAX_UNIT_BYTES``), each read as several units.
    """

    text_units: int = 0
    sentences: int = 0
    sentences_without_entries: int = 0
    sentences_encoded: int = 0
    windows: int = 0
    split_sentences: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    occurrences_used: int = 0
    occurrences_without_subwords: int = 0
    occurrences_too_long: int = 0
    batches: int = 0
    batches_recomputed_float32: int = 0
    encoder_wait_seconds: float = 0.0
    bad_bytes: int = 0
    lines_cut: int = 0
    stopped_early: bool = False
    binary_files_skipped: list[str] = field(default_factory=list)
    paths_skipped: dict[str, str] = field(default_factory=dict)
    entries: int = 0
    entries_found: int = 0
    entries_filled: int = 0
    entries_not_found: list[str] = field(default_factory=list)
    entries_not_encoded: list[str] = field(default_factory=list)
    fill: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    vocabulary: dict[str, int] = field(default_factory=dict)

    @classmethod
    def merged(cls, parts: list[RunStats]) -> RunStats:
        """The statistics of consecutive parts of one pass (shards, in corpus order)."""
        merged = cls()
        for item in fields(cls):
            values = [getattr(part, item.name) for part in parts]
            if isinstance(values[0], bool):
                setattr(merged, item.name, any(values))
            elif isinstance(values[0], (int, float)):
                setattr(merged, item.name, sum(values))
            elif isinstance(values[0], list):
                setattr(merged, item.name, [value for part in values for value in part])
        return merged

    def add(self, counters: Any) -> None:
        """Add the numbers of a dataclass whose fields this one has too (a batch's, say)."""
        for item in fields(counters):
            value = getattr(counters, item.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(self, item.name, getattr(self, item.name) + value)
