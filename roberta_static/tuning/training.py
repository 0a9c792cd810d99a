"""The training of ``tune``: entry vectors and weights whose weighted mean predicts the teacher.

A sentence's static vector is ``sum_j share_j * weight_j * vector_j`` over its entries ``j``,
``share_j`` being the entry's share of the sentence's entry occurrences: the mean of its words'
weighted vectors, as the spaCy component's ``doc_vector = "weighted"`` and the exports compute a
text's vector. A linear head maps it to the teacher's width, where the loss compares it with the
teacher's sentence vector. The head starts as the least-squares fit of the training targets from
the starting vectors, so the first steps refine a good read-out rather than undo the vectors
under a random one. At the end it is folded into what training gives (each vector mapped by the
head's matrix, the head's bias becoming the offset added to a text's vector), so that a text's
weighted mean is the head's output, in the teacher's space; or dropped, as tokenlearn drops its
head.

The vectors and weights are sparse embeddings updated by lazy Adam (only the rows a batch
touches), the head by Adam, all with one step size. The held-out loss is measured after each
epoch; training stops ``patience`` epochs after the best, whose parameters are kept.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from ..model.encoder import resolve_device
from ..progress import TuneProgress
from ..vectors.targets import SentenceTargets
from .config import TuneConfig

_EVAL_BATCH = 1024
_MIN_GAIN = 1e-4  # relative: a held-out loss this much lower counts as better
_RIDGE = 1e-6  # of the mean diagonal, so the head's least-squares fit is always solvable


@dataclass
class Trained:
    """What training gives: the entries' vectors, weights and offset, and how it went."""

    vectors: np.ndarray
    weights: np.ndarray
    offset: np.ndarray | None
    record: dict[str, Any]


class Sentences:
    """The targets' sentences as padded batches of entry ids, shares and teacher vectors."""

    def __init__(self, targets: SentenceTargets, device: torch.device) -> None:
        self.indptr = targets.indptr
        self.entries = targets.entries
        sentence = np.repeat(np.arange(len(targets)), np.diff(self.indptr))
        totals = np.bincount(sentence, weights=targets.counts, minlength=len(targets))
        self.shares = (targets.counts / totals[sentence]).astype(np.float32)
        self.targets = torch.from_numpy(targets.vectors).to(device)
        self.device = device

    def batch(self, ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``[B, L]`` entry ids and shares (padding: entry 0, share 0) and ``[B, T]`` targets."""
        starts, ends = self.indptr[ids], self.indptr[ids + 1]
        lengths = ends - starts
        width = int(lengths.max()) if len(lengths) else 0
        place = np.arange(width) < lengths[:, None]
        source = (starts[:, None] + np.arange(width))[place]
        entries = np.zeros((len(ids), width), dtype=np.int64)
        shares = np.zeros((len(ids), width), dtype=np.float32)
        entries[place], shares[place] = self.entries[source], self.shares[source]
        as_tensor = lambda array: torch.from_numpy(array).to(self.device)  # noqa: E731
        return as_tensor(entries), as_tensor(shares), self.targets[as_tensor(ids)]


class TextModel(nn.Module):
    """Entry vectors and weights (sparse embeddings) and the linear head to the teacher."""

    def __init__(self, vectors: np.ndarray, weights: np.ndarray, target_dim: int) -> None:
        super().__init__()
        self.vectors = nn.Embedding.from_pretrained(
            torch.from_numpy(vectors), freeze=False, sparse=True
        )
        self.weights = nn.Embedding.from_pretrained(
            torch.from_numpy(weights)[:, None], freeze=False, sparse=True
        )
        self.head = nn.Linear(vectors.shape[1], target_dim)

    def texts(self, entries: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
        """``[B, dim]``: each sentence's mean of its entries' weighted vectors."""
        scale = self.weights(entries).squeeze(-1) * shares
        return torch.einsum("bl,bld->bd", scale, self.vectors(entries))

    def forward(self, entries: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
        """The head's output for each sentence."""
        return self.head(self.texts(entries, shares))


def loss_function(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loss of predictions against targets: ``mse`` or ``cosine`` (1 - cosine)."""
    if name == "mse":
        return functional.mse_loss
    return lambda predicted, target: 1 - functional.cosine_similarity(predicted, target).mean()


def train(
    vectors: np.ndarray,
    weights: np.ndarray,
    targets: SentenceTargets,
    split: tuple[np.ndarray, np.ndarray],
    config: TuneConfig,
    progress: Callable[[TuneProgress], None] | None = None,
) -> Trained:
    """Fit the vectors and weights to the targets; the best held-out epoch's are returned.

    Args:
        vectors: ``[entries, dim]`` starting vectors.
        weights: ``[entries]`` starting weights.
        targets: The sentences (their entries are rows of ``vectors``).
        split: Training and held-out sentence numbers.
        config: The options.
        progress: Called after each step.

    """
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    device = resolve_device(config.device)
    sentences = Sentences(targets, device)
    model = TextModel(vectors.astype(np.float32), weights.astype(np.float32), targets.dim)
    model.to(device)
    train_ids, held_ids = split
    _least_squares_head(model, sentences, train_ids)
    loss = loss_function(config.loss)
    start = _evaluate(model, sentences, held_ids, loss)
    start_cosine = _cosine(model, sentences, held_ids)
    best, best_epoch, best_state = start, 0, copy.deepcopy(model.state_dict())
    steps = Steps(model, sentences, loss, config, progress)
    order = np.random.default_rng(config.seed)
    epoch = 0
    for epoch in range(1, config.max_epochs + 1):
        steps.epoch(epoch, train_ids[order.permutation(len(train_ids))], best)
        held = _evaluate(model, sentences, held_ids, loss)
        if held < best * (1 - _MIN_GAIN):
            best, best_epoch, best_state = held, epoch, copy.deepcopy(model.state_dict())
        if epoch - best_epoch >= config.patience:
            break
    model.load_state_dict(best_state)
    record = {
        "device": str(device),
        "epochs": epoch,
        "best_epoch": best_epoch,
        "steps": epoch * steps.per_epoch(len(train_ids)),
        "held_out_loss": {"start": start, "best": best},
        "held_out_cosine": {"start": start_cosine, "best": _cosine(model, sentences, held_ids)},
        "head": f"linear {vectors.shape[1]} -> {targets.dim}, least-squares start, "
        + ("folded into the vectors and offset" if config.head == "fold" else "dropped"),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return _trained(model, config.head == "fold", record)


@torch.no_grad()
def _trained(model: TextModel, fold: bool, record: dict[str, Any]) -> Trained:
    """The model's vectors and weights, with the head folded in (``fold``) or dropped."""
    weights = model.weights.weight[:, 0].cpu().numpy().copy()
    vectors = model.vectors.weight
    if not fold:
        return Trained(vectors.cpu().numpy().copy(), weights, None, record)
    # weight * (W v) averaged over a text is W applied to its weighted mean: the head's output
    # once the bias is added.
    folded = vectors.double() @ model.head.weight.double().T
    return Trained(folded.float().cpu().numpy(), weights, model.head.bias.cpu().numpy(), record)


class Steps:
    """The optimisers and one epoch's steps over the training sentences."""

    def __init__(
        self,
        model: TextModel,
        sentences: Sentences,
        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        config: TuneConfig,
        progress: Callable[[TuneProgress], None] | None,
    ) -> None:
        rate = config.learning_rate
        embeddings = [*model.vectors.parameters(), *model.weights.parameters()]
        self.optimizers = [
            torch.optim.SparseAdam(embeddings, lr=rate),  # lazy Adam: the rows a batch touches
            torch.optim.Adam(model.head.parameters(), lr=rate),
        ]
        self.model, self.sentences, self.loss = model, sentences, loss
        self.config, self.progress = config, progress

    def per_epoch(self, sentences: int) -> int:
        """Steps in an epoch over ``sentences``."""
        return -(-sentences // self.config.batch_size)

    def epoch(self, number: int, ids: np.ndarray, best: float) -> None:
        """One step per batch of ``ids``, in that order."""
        self.model.train()
        size, epochs = self.config.batch_size, self.config.max_epochs
        total = self.per_epoch(len(ids))
        for step, first in enumerate(range(0, len(ids), size), 1):
            entries, shares, wanted = self.sentences.batch(ids[first : first + size])
            value = self.loss(self.model(entries, shares), wanted)
            for optimizer in self.optimizers:
                optimizer.zero_grad()
            value.backward()
            for optimizer in self.optimizers:
                optimizer.step()
            if self.progress is not None:
                loss = float(value.detach())
                self.progress(TuneProgress(number, epochs, step, total, loss, best))


@torch.no_grad()
def _least_squares_head(model: TextModel, sentences: Sentences, ids: np.ndarray) -> None:
    """Set the head to the least-squares fit of the targets from the current sentence vectors."""
    dim = model.head.in_features + 1
    # Summed in float64 on the CPU: some devices (MPS) have no float64.
    gram = torch.zeros(dim, dim, dtype=torch.float64)
    cross = torch.zeros(dim, model.head.out_features, dtype=torch.float64)
    for first in range(0, len(ids), _EVAL_BATCH):
        entries, shares, wanted = sentences.batch(ids[first : first + _EVAL_BATCH])
        texts = functional.pad(model.texts(entries, shares).cpu().double(), (0, 1), value=1.0)
        gram += texts.T @ texts
        cross += texts.T @ wanted.cpu().double()
    gram += torch.eye(dim, dtype=gram.dtype) * _RIDGE * gram.diagonal().mean()
    solution = torch.linalg.solve(gram, cross).float()
    model.head.weight.copy_(solution[:-1].T)
    model.head.bias.copy_(solution[-1])


@torch.no_grad()
def _evaluate(
    model: TextModel,
    sentences: Sentences,
    ids: np.ndarray,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> float:
    """The loss over the sentences ``ids``, each counting once."""
    model.eval()
    total = 0.0
    for first in range(0, len(ids), _EVAL_BATCH):
        entries, shares, wanted = sentences.batch(ids[first : first + _EVAL_BATCH])
        total += float(loss(model(entries, shares), wanted)) * len(wanted)
    return total / len(ids)


def _cosine(model: TextModel, sentences: Sentences, ids: np.ndarray) -> float:
    """Mean cosine of the head's output and the teacher's vector over the sentences ``ids``."""
    return 1 - _evaluate(model, sentences, ids, loss_function("cosine"))
