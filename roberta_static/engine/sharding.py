"""The shards of a pass and their quotas: ``max_contexts`` keeps meaning the first N occurrences.

Across shards read at the same time, "the first N occurrences in corpus order" needs each shard's
occurrences per entry first (a matching-only pass): shard ``i`` may then take
``clamp(N - earlier shards' count, 0, ...)`` of each. That pass segments the corpus a second time
(about 1.6x the CPU work); ``max_contexts=0`` skips it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..config import DistillConfig
from ..text.corpus import START, Corpus, Position, TextCorpus
from ..text.shards import Shard, plan_shards
from .state import ShardState, contexts_allowed


def whole_corpus(corpus: Corpus | TextCorpus, entries: int, config: DistillConfig) -> ShardState:
    """The corpus as one shard, read from the start in one process."""
    files = getattr(corpus, "files", [])
    shard = Shard(START, Position(len(files), 0, 1, 0))
    return ShardState.fresh(shard, np.full(entries, contexts_allowed(config)))


def quotas(counts: np.ndarray, max_contexts: int) -> np.ndarray:
    """Occurrences each shard may take per entry so that together they take the first N.

    Args:
        counts: ``[shards, entries]`` occurrences of each entry in each shard.
        max_contexts: N.

    Example:
        >>> quotas(np.array([[3, 0], [2, 1], [4, 4]]), 4).tolist()
        [[3, 0], [1, 1], [0, 3]]

    """
    before = np.cumsum(counts, axis=0) - counts
    return np.clip(max_contexts - before, 0, counts)


def fresh_shards(
    corpus: Corpus,
    entries: int,
    config: DistillConfig,
    count: Callable[[list[Shard]], np.ndarray],
) -> list[ShardState]:
    """The corpus's shards before the pass; with ``max_contexts``, ``count`` gives the quotas.

    ``count(shards)`` returns ``[shards, entries]`` occurrences; it is called only when quotas
    are needed, without the last shard.

    A pass in one process reads until every entry has its ``max_contexts``: a shard after that
    point is never read, the shard holding it stops there, and every shard before it is read to
    its end (it counts sentences, even where it may take no occurrence).
    """
    shards = plan_shards(corpus.files)
    limit = config.max_contexts
    allowed = np.full((len(shards), entries), contexts_allowed(config))
    may_stop_early = [True] * len(shards)
    skipped = [False] * len(shards)
    if limit and len(shards) > 1:
        # The last shard bounds no later one, so it is not counted: it takes what is left.
        counts = count(shards[:-1])
        allowed[:-1] = quotas(counts, limit)
        total = np.cumsum(counts, axis=0)
        allowed[-1] = np.clip(limit - total[-1], 0, limit)
        # Where every entry has its N, the serial pass stops: in that shard, and before the next.
        saturated = (total >= limit).all(axis=1).tolist() + [True]
        may_stop_early, skipped = saturated, [False, *saturated[:-1]]
    return [
        ShardState.fresh(shard, quota, early, skip)
        for shard, quota, early, skip in zip(shards, allowed, may_stop_early, skipped, strict=True)
    ]
