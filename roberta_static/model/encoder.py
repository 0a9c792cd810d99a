"""Run a loaded encoder, keeping only the hidden layers asked for: device, dtype, token budget."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn

from ..config import ALL_LAYERS, Combine, DistillConfig, Layers
from ..errors import ConfigError, ModelLoadError
from .batches import Batch, EncoderInput, make_batches
from .pooling import Occurrences, occurrence_arrays
from .precision import bound_onednn_caches, quantize_int8, resolve_precision
from .staging import Staging
from .subwords import SubwordEncoder

_SANE_LENGTH = 1_000_000  # tokenizers without a known limit report about 1e30
CPU_BATCH_TOKENS = 8192
MAX_GPU_BATCH_TOKENS = 131_072  # past this, larger batches no longer speed up a GPU
GPU_MEMORY_SHARE = 0.5  # of the free memory, for one batch's activations
# Models whose transformers 5 code takes a ready SDPA mask as it would build it (see
# takes_prepared_masks); each is checked against the 2D mask in tests/test_encoder.py.
PREPARED_MASK_MODELS = frozenset({"bert", "roberta"})


@dataclass
class Encoded:
    """A batch's chosen hidden states as queued on the device, and its occurrences there.

    Attributes:
        states: ``[layers, batch, tokens, hidden]`` float32: the chosen layers, then (for the
            sentence targets) the last one, when it is not among them.
        occurrences: Where the batch's occurrences are, on the device.
        overflow: On the device, whether half-precision states hold a NaN or Inf; None in float32.
        rerun: Computes the states again with the model in float32 (and counts it).
        chosen: How many of the first ``states`` are the chosen layers.
        last: Which of ``states`` is the model's last layer, when the run keeps sentence
            targets; None otherwise.

    """

    states: torch.Tensor
    occurrences: Occurrences
    overflow: torch.Tensor | None
    rerun: Callable[[], torch.Tensor]
    chosen: int
    last: int | None = None

    def overflowed(self) -> bool:
        """Whether the states overflowed: reading it waits for the device to finish them."""
        return self.overflow is not None and bool(self.overflow)

    def checked_states(self) -> torch.Tensor:
        """The states, computed again in float32 if they overflowed."""
        return self.rerun() if self.overflowed() else self.states


class Encoder:
    """A transformer truncated above its highest chosen layer, on its device, with its tokenizer.

    Args:
        model: A Hugging Face model whose forward accepts ``output_hidden_states``.
        tokenizer: Its fast tokenizer.
        config: The run's options (layers, device, dtype, max_length are used here).

    The model is moved to the device and dtype in place; its layer list is left whole.

    """

    def __init__(self, model: nn.Module, tokenizer: Any, config: DistillConfig) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ModelLoadError(
                f"{config.model}: tokenizer {type(tokenizer).__name__} has no fast (Rust) version"
            )
        self.num_layers = int(model.config.num_hidden_layers)
        self.layers = resolve_layers(config.layers, self.num_layers)
        # The sentence targets pool the last layer: it is read too (and the blocks up to it run).
        self.last_layer = None
        self.read = self.layers
        if config.sentence_targets:
            if self.num_layers not in self.layers:
                self.read = (*self.layers, self.num_layers)
            self.last_layer = self.read.index(self.num_layers)
        self.hidden_size = int(model.config.hidden_size)
        self.device = resolve_device(config.devices[0])
        if self.device.type == "cpu":
            bound_onednn_caches()
        self.precision = resolve_precision(config.dtype, self.device, config.quantize)
        self.dtype = self.precision.dtype
        self.model = truncate_layers(model, max(self.read)).to(self.device, self.dtype).eval()
        if config.quantize == "int8":
            self.model = quantize_int8(self.model, self.device)
        self.max_length = resolve_max_length(model, tokenizer, config.max_length)
        self.batch_tokens = resolve_batch_tokens(config.batch_tokens, self)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.subwords = SubwordEncoder(tokenizer.backend_tokenizer, self.max_length, pad_id)
        self.staging = Staging(self.device)
        self.prepared_masks = takes_prepared_masks(self.model)
        self.float32_recomputes = 0

    def before_each_block(self, hook: Callable[..., None]) -> list[Any]:
        """Call ``hook`` before each of the model's blocks runs; returns removable handles.

        The blocks only (the items of the model's module lists): a hook on every module would
        add a Python call to each of the hundreds of module calls of every batch.
        """
        return [
            block.register_forward_pre_hook(hook)
            for blocks in self.model.modules()
            if isinstance(blocks, nn.ModuleList)
            for block in blocks
        ]

    def output_dim(self, combine: Combine) -> int:
        """Width of a static vector from this encoder's layers, combined by ``combine``."""
        return output_dim(self.hidden_size, len(self.layers), combine)

    def batches(self, inputs: Sequence[EncoderInput]) -> list[Batch]:
        """The inputs as padded batches within this encoder's token budget."""
        return list(make_batches(inputs, self.batch_tokens, self.subwords.pad_id))

    @torch.inference_mode()
    def encode(self, batch: Batch) -> Encoded:
        """Queue a batch's forward pass on the device; nothing here waits for the device.

        Its arrays go to the device in one copy (:class:`~.staging.Staging`); whether
        half-precision states overflowed is left on the device, for :meth:`Encoded.overflowed`.
        """
        input_ids, mask, occurrences = self.move(batch)
        states = self.forward(input_ids, mask)
        # One reduction instead of an elementwise test: a sum is finite only if every term is.
        overflow = None if self.dtype == torch.float32 else ~torch.isfinite(states.sum())
        rerun = partial(self._in_float32, input_ids, mask)
        return Encoded(states, occurrences, overflow, rerun, len(self.layers), self.last_layer)

    def hidden_states(self, batch: Batch) -> torch.Tensor:
        """Chosen hidden layers of a batch as float32, shape ``[layers, batch, tokens, hidden]``.

        A half-precision batch that overflows to NaN or Inf is run again in float32 and counted
        in ``float32_recomputes``.
        """
        return self.encode(batch).checked_states()[: len(self.layers)]

    def move(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor | None, Occurrences]:
        """The batch's input ids, the mask the model is given, and its occurrences, on the device.

        A model that takes prepared masks gets none for a batch without padding (known here
        from the host arrays), and a 4D boolean view of the padding mask otherwise.
        """
        padded = not batch.attention_mask.all()
        send_mask = padded or not self.prepared_masks
        arrays = [batch.input_ids, *([batch.attention_mask] if send_mask else [])]
        moved = self.staging.move([*arrays, *occurrence_arrays(batch)])
        input_ids, mask = moved[0], moved[1] if send_mask else None
        if mask is not None and self.prepared_masks:
            rows, width = mask.shape
            mask = mask.bool()[:, None, None, :].expand(rows, 1, width, width)
        return input_ids, mask, Occurrences(*moved[len(arrays) :])

    @torch.inference_mode()
    def _in_float32(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        self.model.float()
        try:
            states = self.forward(input_ids, mask)
        finally:
            self.model.to(self.dtype)  # float32 back to half precision is exact
        self.float32_recomputes += 1
        return states

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The chosen hidden layers, float32, of inputs on the device (as :meth:`move` gives)."""
        output = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        # transformers 5 records hidden states with hooks on the blocks, so a model cut to no
        # blocks (only layer 0 chosen) reports none; its output is then the embedding output.
        states = output.hidden_states or (output.last_hidden_state,)
        return torch.stack([states[layer] for layer in self.read]).float()


def takes_prepared_masks(model: nn.Module) -> bool:
    """Whether ``model`` is given its SDPA attention mask ready-made (or none without padding).

    transformers 5's BERT and RoBERTa make it with ``create_bidirectional_mask``, which returns a
    4D mask as given, and otherwise asks the device whether the whole 2D mask is ones (to pass
    none): a wait for the device before every forward pass. Older transformers (their own mask
    code), other attention implementations and other models are given the 2D mask.
    """
    config = model.config
    return (
        config.model_type in PREPARED_MASK_MODELS
        and getattr(config, "_attn_implementation", None) == "sdpa"
        and hasattr(sys.modules.get(type(model).__module__), "create_bidirectional_mask")
    )


def resolve_layers(layers: Layers, num_layers: int) -> tuple[int, ...]:
    """Turn ``"all"`` and negative indices into positions among ``num_layers + 1`` hidden states."""
    total = num_layers + 1
    if layers == ALL_LAYERS:
        return tuple(range(total))
    bad = [layer for layer in layers if not -total <= layer < total]
    if bad:
        raise ConfigError(
            f"{bad} out of range; this model has layers 0-{num_layers} "
            f"(or {-total} to -1 counted from the top)",
            field="layers",
        )
    return tuple(layer % total for layer in layers)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA, then MPS, then CPU; an unavailable explicit choice is an error."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }
    chosen = torch.device(device)
    if not available[chosen.type] or (
        chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count()
    ):
        raise ConfigError(f"{device} is not available on this machine", field="device")
    return chosen


def free_memory(device: torch.device) -> int | None:
    """Bytes free on ``device`` (available RAM for the CPU on Linux), or None where unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        try:
            with open("/proc/meminfo", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
    return None


def resolve_batch_tokens(requested: int | None, encoder: Encoder) -> int:
    """The requested budget, else 8,192 on the CPU and a share of the free memory on CUDA."""
    if requested is not None:
        return requested
    free = free_memory(encoder.device) if encoder.device.type == "cuda" else None
    if free is None:
        return max(CPU_BATCH_TOKENS, encoder.max_length)
    fits = int(free * GPU_MEMORY_SHARE) // activation_bytes_per_token(encoder)
    return max(encoder.max_length, min(fits // 1024 * 1024, MAX_GPU_BATCH_TOKENS))


def activation_bytes_per_token(encoder: Encoder) -> int:
    """Device memory one input token needs during a forward pass, generously counted.

    Every hidden state up to the top layer read is kept (``output_hidden_states``), one block's
    query/key/value and feed-forward activations are alive at a time (counted twice for the
    kernels' scratch), and the layers read are stacked and copied to float32.
    """
    config = encoder.model.config
    hidden = encoder.hidden_size
    intermediate = int(getattr(config, "intermediate_size", 4 * hidden))
    size = torch.finfo(encoder.dtype).bits // 8
    kept = (max(encoder.read) + 1) * hidden * size
    block = 2 * (3 * hidden + intermediate) * size
    chosen = len(encoder.read) * hidden * (size + 4)
    return kept + block + chosen


def resolve_max_length(model: nn.Module, tokenizer: Any, requested: int | None) -> int:
    """The longest input the model accepts, or ``requested`` when it is within that limit."""
    limits = [int(tokenizer.model_max_length)] if tokenizer.model_max_length < _SANE_LENGTH else []
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions:
        # RoBERTa-style position ids start after the padding index.
        padding_idx = getattr(getattr(model, "embeddings", None), "padding_idx", None)
        limits.append(int(positions) - (padding_idx + 1 if padding_idx is not None else 0))
    limit = min(limits) if limits else 512
    if requested is None:
        return limit
    if requested > limit:
        raise ConfigError(
            f"{requested} exceeds this model's limit of {limit} tokens", field="max_length"
        )
    return requested


def truncate_layers(model: nn.Module, top_layer: int) -> nn.Module:
    """A view of ``model`` that runs only blocks ``1..top_layer``; parameters are shared.

    The block list is the ``nn.ModuleList`` holding ``num_hidden_layers`` blocks. The modules on
    the path to it are shallow copies, so the caller's model keeps all of its blocks.
    """
    num_layers = model.config.num_hidden_layers
    path = next(
        (
            name
            for name, module in model.named_modules()
            if isinstance(module, nn.ModuleList) and len(module) == num_layers
        ),
        None,
    )
    if path is None or top_layer >= num_layers:
        return model
    root = _copy_module(model)
    root.config = copy.copy(model.config)
    root.config.num_hidden_layers = top_layer
    parent = root
    *parents, leaf = path.split(".")
    for name in parents:
        child = _copy_module(getattr(parent, name))
        setattr(parent, name, child)
        parent = child
    setattr(parent, leaf, nn.ModuleList(list(getattr(parent, leaf))[:top_layer]))
    return root


def _copy_module(module: nn.Module) -> nn.Module:
    clone = copy.copy(module)
    clone._modules = dict(module._modules)
    return clone


def output_dim(hidden_size: int, n_layers: int, combine: Combine) -> int:
    """Width of a static vector."""
    return hidden_size * n_layers if combine == "concat" else hidden_size
