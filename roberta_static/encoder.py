"""Load a Hugging Face encoder and run it, keeping only the hidden layers that were asked for.

torch and transformers are imported here and in ``accumulate.py`` only.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .batching import (
    Batch,
    EncoderInput,
    SubwordEncoder,
    count_special_tokens,
    make_batches,
    text_window,
)
from .config import ALL_LAYERS, DistillConfig, Layers
from .errors import ConfigError, ModelLoadError
from .finetune import FINETUNE_FILE, FinetuneConfig
from .model_source import SPACY_PREFIX, cached_revision, hub_cache_only, resolve_model_name

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_SANE_LENGTH = 1_000_000  # tokenizers without a known limit report about 1e30
CPU_BATCH_TOKENS = 8192
MAX_GPU_BATCH_TOKENS = 131_072  # past this, larger batches no longer speed up a GPU
GPU_MEMORY_SHARE = 0.5  # of the free memory, for one batch's activations


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
        self.hidden_size = int(model.config.hidden_size)
        self.device = resolve_device(config.devices[0])
        self.dtype = resolve_dtype(config.dtype, self.device)
        self.model = truncate_layers(model, max(self.layers)).to(self.device, self.dtype).eval()
        self.max_length = resolve_max_length(model, tokenizer, config.max_length)
        self.batch_tokens = resolve_batch_tokens(config.batch_tokens, self)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.subwords = SubwordEncoder(tokenizer.backend_tokenizer, self.max_length, pad_id)
        self.float32_recomputes = 0

    def batches(self, inputs: Sequence[EncoderInput]) -> list[Batch]:
        """The inputs as padded batches within this encoder's token budget."""
        return list(make_batches(inputs, self.batch_tokens, self.subwords.pad_id))

    @torch.inference_mode()
    def hidden_states(self, batch: Batch) -> torch.Tensor:
        """Chosen hidden layers of a batch as float32, shape ``[layers, batch, tokens, hidden]``.

        A half-precision batch that overflows to NaN or Inf is run again in float32 and counted
        in ``float32_recomputes``.
        """
        input_ids = to_device(batch.input_ids, self.device)
        mask = to_device(batch.attention_mask, self.device)
        states = self._forward(input_ids, mask)
        # One reduction instead of an elementwise test: a sum is finite only if every term is.
        if self.dtype != torch.float32 and not torch.isfinite(states.sum()):
            self.model.float()
            try:
                states = self._forward(input_ids, mask)
            finally:
                self.model.to(self.dtype)  # float32 back to half precision is exact
            self.float32_recomputes += 1
        return states

    def _forward(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        output = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        # transformers 5 records hidden states with hooks on the blocks, so a model cut to no
        # blocks (only layer 0 chosen) reports none; its output is then the embedding output.
        states = output.hidden_states or (output.last_hidden_state,)
        return torch.stack([states[layer] for layer in self.layers]).float()


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on ``device``; through pinned memory on CUDA, so the copy is asynchronous."""
    tensor = torch.from_numpy(array)
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def load_pretrained(
    config: DistillConfig | FinetuneConfig, auto_class: str = "AutoModel", **extra: Any
) -> tuple[Any, Any]:
    """Load the model and fast tokenizer named by ``config.model``.

    ``config.model`` is a hub id, a local folder, a short name of an installed model package
    (``minilm``), or ``spacy:PIPELINE`` for the transformer inside an installed spacy-transformers
    pipeline.

    Weights load from safetensors only, unless ``config.allow_pickle``; model code from the hub
    runs only with ``config.trust_remote_code``. ``auto_class`` names the transformers class that
    loads the weights (``AutoModelForMaskedLM`` for fine-tuning); ``extra`` goes to its
    ``from_pretrained``.
    """
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    name = config.model
    if name.startswith(SPACY_PREFIX):
        from roberta_static.spacy_plugin.transformer_source import load_from_spacy_pipeline

        return load_from_spacy_pipeline(name)
    location = resolve_model_name(name)
    path = Path(location)
    options: dict[str, Any] = {"trust_remote_code": config.trust_remote_code}
    if path.is_dir():
        options["local_files_only"] = True
        pickled_only = not any(path.glob("*.safetensors")) and any(path.glob("pytorch_model*.bin"))
        if pickled_only and not config.allow_pickle:
            raise ModelLoadError(
                f"{name}: only pickled weights (pytorch_model.bin), which can run code when "
                "loaded; pass --allow-pickle if you trust them"
            )
    else:
        options["local_files_only"] = hub_cache_only(location)
    with _load_errors(name):
        # The config alone says whether the model needs code of its own; transformers 5's
        # tokenizer loader would fail on other grounds before refusing it.
        model_config = AutoConfig.from_pretrained(location, **options)
        tokenizer = AutoTokenizer.from_pretrained(location, use_fast=True, **options)
    if isinstance(config, DistillConfig):
        check_fits(config, model_config, tokenizer)  # before the weights, the slow part, load
    finetune_record = path / FINETUNE_FILE if auto_class == "AutoModel" else None
    with _load_errors(name), _without_loading_bar(), _quiet_load_report(finetune_record):
        model = getattr(transformers, auto_class).from_pretrained(
            location,
            config=model_config,
            use_safetensors=None if config.allow_pickle else True,
            **options,
            **extra,
        )
    return model, tokenizer


def check_fits(config: DistillConfig, model_config: Any, tokenizer: Any) -> None:
    """Refuse layers the model lacks, or a ``max_length`` with no room beside its special tokens.

    Needs only the model's config and tokenizer, so a bad option fails before the weights load;
    :class:`Encoder` checks the same again on the loaded model.

    Raises:
        ConfigError: ``config.layers`` or ``config.max_length`` cannot work with this model.

    """
    resolve_layers(config.layers, int(model_config.num_hidden_layers))
    if config.max_length is not None and getattr(tokenizer, "is_fast", False):
        text_window(config.max_length, count_special_tokens(tokenizer.backend_tokenizer))


@contextmanager
def _load_errors(name: str) -> Iterator[None]:
    """Turn transformers' errors while loading ``name`` into one-line :class:`ModelLoadError`."""
    try:
        yield
    except (OSError, ValueError, KeyError) as error:
        if "trust_remote_code" in str(error):
            raise ModelLoadError(
                f"{name}: the model contains custom code, which runs when it loads; "
                "pass --trust-remote-code if you trust it"
            ) from None
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(f"{name}: cannot load a model ({reason})") from None


@contextmanager
def _without_loading_bar() -> Iterator[None]:
    """No "Loading weights" bar (transformers 5) in a library call; the caller's setting returns."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


@contextmanager
def _quiet_load_report(finetune_record: Path | None) -> Iterator[None]:
    """Silence transformers' report on a ``finetune`` output loaded as a bare encoder.

    Such a folder holds a masked-LM model: its head weights go unused and its pooler is missing,
    as expected, so transformers' warning about them would only alarm.
    """
    from transformers.utils import logging as hf_logging

    if finetune_record is None or not finetune_record.is_file():
        yield
        return
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def model_fingerprint(name: str, model: nn.Module) -> dict[str, str | None]:
    """Provenance: a local folder's path and its weights file's SHA-256, or the hub commit."""
    if name.startswith(SPACY_PREFIX):
        return {"revision": getattr(model.config, "_commit_hash", None)}
    location = resolve_model_name(name)
    path = Path(location)
    if not path.is_dir():
        # transformers 5 no longer records the commit on the config; the cache names it.
        return {"revision": cached_revision(location)}
    for weights in (path / f for f in _WEIGHT_FILES):
        if weights.is_file():
            digest = hashlib.sha256()
            with open(weights, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return {
                "path": str(path.resolve()),
                "weights_file": weights.name,
                "sha256": digest.hexdigest(),
            }
    return {"path": str(path.resolve())}


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

    Every hidden state up to the top chosen layer is kept (``output_hidden_states``), one block's
    query/key/value and feed-forward activations are alive at a time (counted twice for the
    kernels' scratch), and the chosen layers are stacked and copied to float32.
    """
    config = encoder.model.config
    hidden = encoder.hidden_size
    intermediate = int(getattr(config, "intermediate_size", 4 * hidden))
    size = torch.finfo(encoder.dtype).bits // 8
    kept = (max(encoder.layers) + 1) * hidden * size
    block = 2 * (3 * hidden + intermediate) * size
    chosen = len(encoder.layers) * hidden * (size + 4)
    return kept + block + chosen


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on CUDA (float16 where bfloat16 is missing) and float32 elsewhere."""
    if dtype != "auto":
        return _DTYPES[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


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
