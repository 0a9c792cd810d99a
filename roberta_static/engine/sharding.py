"""Shards' quotas: ``max_contexts`` keeps meaning the first N occurrences in corpus order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..config import DistillConfig
from ..model.batches import EncodeStats
from ..text.shards import Shard
from .encoders import ShardState
from .state import PassState, contexts_allowed
from .stats import RunStats


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


def occurring(shard_states: list[ShardState]) -> np.ndarray:
    """Which entries occur in the shards read (whether or not the encoder could read them)."""
    taken = np.sum([entry.quota - entry.state.remaining for entry in shard_states], axis=0)
    return taken > 0


def fresh_shards(
    shards: list[Shard],
    entries: int,
    config: DistillConfig,
    count: Callable[[list[Shard]], np.ndarray],
) -> list[ShardState]:
    """The shards' states before the pass; with ``max_contexts``, ``count`` gives the quotas.

    ``count(shards)`` returns ``[shards, entries]`` occurrences; it is called only when quotas
    are needed, without the last shard.

    The serial pass reads until every entry has its ``max_contexts``: a shard after that point is
    never read, the shard holding it stops there, and every shard before it is read to its end
    (it counts sentences, even where it may take no occurrence).
    """
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
    states = []
    for index, (shard, quota) in enumerate(zip(shards, allowed.astype(np.int64), strict=True)):
        stats = RunStats(stopped_early=skipped[index])
        state = PassState(shard.start, quota.copy(), stats)
        early = may_stop_early[index]
        states.append(ShardState(shard, state, EncodeStats(), quota, skipped[index], early))
    return states
