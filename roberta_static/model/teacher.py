"""The teacher's sentence vector: the model's own pooling of its last hidden layer.

A sentence-transformers folder says how its model makes a sentence vector: ``modules.json`` lists
the modules (a ``Transformer``, a ``Pooling``, maybe a ``Normalize``) and the pooling module's
``config.json`` names the pooling (``mean``, ``cls``, ``max`` or ``lasttoken``). Only those JSON
files are read, never a pickle. A model without them (a plain Hugging Face encoder) pools by the
mean of the last layer over the sentence's tokens. :func:`sentence_vectors` applies the pooling to
hidden states, as sentence-transformers' ``Pooling`` and ``Normalize`` modules do.

Example:
    >>> pooling = teacher_pooling("minilm")  # doctest: +SKIP
    >>> pooling.mode, pooling.normalize  # doctest: +SKIP
    ('mean', True)

"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch

from ..errors import ModelLoadError
from .sources import SPACY_PREFIX, resolve_model_name

TeacherMode = Literal["mean", "cls", "max", "lasttoken"]
TEACHER_MODES: tuple[str, ...] = get_args(TeacherMode)
MODULES_FILE = "modules.json"
# sentence-transformers' boolean pooling keys, from before its single ``pooling_mode`` key.
_LEGACY_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_DEFAULT_SOURCE = "no modules.json: the mean of the last layer"


@dataclass(frozen=True)
class TeacherPooling:
    """How the teacher makes a sentence vector from its last layer.

    Attributes:
        mode: ``mean`` of the sentence's tokens, the first token (``cls``), their ``max``, or
            the last token (``lasttoken``).
        normalize: Scale the vector to unit length (a ``Normalize`` module).
        source: Where this was read (the pooling module's ``config.json``), or why it is the
            default.

    """

    mode: TeacherMode = "mean"
    normalize: bool = False
    source: str = _DEFAULT_SOURCE

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for the targets' ``meta.json``)."""
        return asdict(self)


def teacher_pooling(model: str | Path) -> TeacherPooling:
    """The pooling of the model ``model`` names: its folder's, or the hub cache's copy of it.

    Args:
        model: What ``--model`` takes: a folder, a short name (``minilm``), a hub id or
            ``spacy:PIPELINE`` (whose transformer has no pooling config: the default).

    Raises:
        ModelLoadError: The folder's ``modules.json`` or pooling config is malformed, or asks for
            a pooling or a module this cannot reproduce.

    """
    name = str(model)
    if name.startswith(SPACY_PREFIX):
        return TeacherPooling(source=f"{name}: a spaCy pipeline's transformer has no pooling")
    location = resolve_model_name(name)
    folder = Path(location) if Path(location).is_dir() else _cached_snapshot(location)
    return TeacherPooling() if folder is None else read_pooling(folder)


def read_pooling(folder: Path) -> TeacherPooling:
    """The pooling a sentence-transformers folder's JSON files describe (the default without).

    Raises:
        ModelLoadError: See :func:`teacher_pooling`.

    """
    modules_file = folder / MODULES_FILE
    if not modules_file.is_file():
        return TeacherPooling()
    modules = _json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ModelLoadError(f"{modules_file}: expected a list of modules")
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules]
    unknown = [kind for kind in kinds if kind not in ("Transformer", "Pooling", "Normalize")]
    if unknown:
        raise ModelLoadError(
            f"{modules_file}: lists a {unknown[0]} module, which roberta-static cannot apply to "
            "the teacher's sentence vectors (it reproduces Transformer, Pooling and Normalize)"
        )
    if "Pooling" not in kinds:
        return TeacherPooling(normalize="Normalize" in kinds, source=f"{modules_file}: no Pooling")
    config_file = folder / str(modules[kinds.index("Pooling")].get("path", "")) / "config.json"
    mode = _pooling_mode(config_file, _json(config_file))
    return TeacherPooling(mode, "Normalize" in kinds, str(config_file))


def _pooling_mode(path: Path, config: Any) -> TeacherMode:
    """The one pooling mode a ``Pooling`` config names, new key or legacy booleans."""
    if not isinstance(config, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    modes = config.get("pooling_mode")
    if modes is None:
        modes = [mode for key, mode in _LEGACY_KEYS.items() if config.get(key)]
    modes = [modes] if isinstance(modes, str) else list(modes)
    if len(modes) != 1 or modes[0] not in TEACHER_MODES:
        raise ModelLoadError(
            f"{path}: pooling {' + '.join(map(str, modes)) or 'none'}; the teacher's sentence "
            f"vectors take one of {', '.join(TEACHER_MODES)}"
        )
    return modes[0]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{path}: cannot read it ({error})") from None


def _cached_snapshot(repo_id: str) -> Path | None:
    """The local hub cache's folder of ``repo_id`` when it holds its ``modules.json``."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, MODULES_FILE)
    except ValueError:  # not a repo id the hub would accept
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def sentence_vectors(
    hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: TeacherPooling
) -> torch.Tensor:
    """Pool each sentence's last-layer states into its vector, as sentence-transformers does.

    Args:
        hidden: ``[batch, tokens, width]`` last hidden layer.
        attention_mask: ``[batch, tokens]``, 1 for the sentence's tokens (special tokens
            included, as sentence-transformers counts them), 0 for padding.
        pooling: How to pool.

    Returns:
        ``[batch, width]`` float32 sentence vectors.

    """
    mask = attention_mask.to(hidden.device).bool()
    states = hidden.float()
    if pooling.mode == "mean":
        weights = mask.unsqueeze(-1).to(states.dtype)
        vectors = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    elif pooling.mode == "max":
        vectors = states.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(dim=1).values
    else:
        # The first token of each sentence, or the last: padding may be on either side.
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        if pooling.mode == "cls":
            chosen = torch.where(mask, positions, mask.shape[1]).min(dim=1).values
        else:
            chosen = torch.where(mask, positions, -1).max(dim=1).values
        vectors = states[torch.arange(len(states), device=states.device), chosen.clamp(min=0)]
    if pooling.normalize:
        vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
    return vectors


def batch_sentence_vectors(
    hidden: torch.Tensor, attention_mask: np.ndarray, rows: np.ndarray, pooling: TeacherPooling
) -> np.ndarray:
    """The vectors of a batch's sentences ``rows`` as :func:`sentence_vectors` pools them.

    Args:
        hidden: ``[batch, tokens, width]`` the batch's last hidden layer, on its device.
        attention_mask: ``[batch, tokens]`` the batch's mask.
        rows: The sentences wanted.
        pooling: How to pool.

    Returns:
        ``[len(rows), width]`` float32 on the CPU.

    """
    mask = torch.from_numpy(attention_mask[rows])
    index = torch.from_numpy(rows).to(hidden.device)
    return sentence_vectors(hidden.index_select(0, index), mask, pooling).cpu().numpy()
