"""Load a Hugging Face model and its fast tokenizer safely: safetensors first, no remote code.

Model sources (hub id, folder, package, ``spacy:``) are resolved by :mod:`.sources`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from torch import nn

from ..config import DistillConfig
from ..errors import ModelLoadError
from ..finetune.config import FinetuneConfig
from ..outputs import FINETUNE_FILE
from .encoder import resolve_layers
from .sources import (
    SPACY_PREFIX,
    cached_revision,
    hub_cache_only,
    resolve_model_name,
    weights_digest,
)
from .subwords import count_special_tokens, text_window


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
    from transformers.utils import CONFIG_NAME

    name = config.model
    if name.startswith(SPACY_PREFIX):
        from roberta_static.model.spacy_source import load_from_spacy_pipeline

        return load_from_spacy_pipeline(name)
    location = resolve_model_name(name)
    path = Path(location)
    options: dict[str, Any] = {"trust_remote_code": config.trust_remote_code}
    if path.is_dir():
        options["local_files_only"] = True
        if not (path / CONFIG_NAME).is_file():  # transformers would ask for a `model_type` key
            raise ModelLoadError(
                f"{name}: cannot load a model (the folder has no {CONFIG_NAME}; "
                "save_pretrained writes one)"
            )
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
    except (OSError, ValueError, KeyError, SafetensorError) as error:
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
    found = weights_digest(path)
    if found is None:
        return {"path": str(path.resolve())}
    return {"path": str(path.resolve()), "weights_file": found[0], "sha256": found[1]}


def quiet_transformers() -> None:
    """Our progress bar and one-line errors replace transformers' warnings and loading bars."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
