"""`DistillConfig`: every option of a distillation run, validated before any model loads."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ConfigError, require_minimums
from .vectors.postprocess import PostProcessing

Pooling = Literal["mean", "first", "last", "max"]
Combine = Literal["mean", "sum", "concat"]
Case = Literal["lower", "keep"]
Device = str  # auto, cpu, cuda, cuda:N, mps, or several separated by commas
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DType = Literal["auto", "float32", "bfloat16", "float16"]
Quantize = Literal["none", "int8"]
FillUnseen = Literal["none", "decontextualized", "mapped"]
Engine = Literal["local", "ray"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "pool": ("mean", "first", "last", "max"),
    "combine": ("mean", "sum", "concat"),
    "case": ("lower", "keep"),
    "dtype": ("auto", "float32", "bfloat16", "float16"),
    "quantize": ("none", "int8"),
    "fill_unseen": ("none", "decontextualized", "mapped"),
    "engine": ("local", "ray"),
}

# The least value of each count option (``None``, where allowed, means unset or automatic); the
# CLI declares them to Typer, so ``--help`` shows them and bad values fail before any import.
MINIMUMS = {
    "max_contexts": 0,
    "workers": 1,
    "encoders": 1,
    "batch_tokens": 1,
    "chunk_sentences": 1,
    "max_length": 2,  # two tokens of text (batching.MIN_WINDOW), with no special tokens
    "min_count": 1,
    "max_vocab": 1,
    "sentence_targets": 0,
}

_LAYER_ITEM = re.compile(r"^(-?\d+)(?:-(-?\d+))?$")


def parse_devices(spec: str) -> list[str]:
    """The devices of ``cpu``, ``cuda:0,cuda:1`` and the like, checked.

    Example:
        >>> parse_devices("cuda:0, cuda:1")
        ['cuda:0', 'cuda:1']

    """
    devices = [item.strip() for item in spec.split(",")]
    for item in devices:
        if not _DEVICE.match(item):
            raise ConfigError(
                f"expected auto, cpu, cuda, cuda:N or mps (or several, comma separated), "
                f"got {item!r}",
                "device",
            )
    return devices


def parse_workers(value: int | str | None) -> int | None:
    """``auto`` (or None) as None, a count as an int, checked.

    Example:
        >>> parse_workers("4"), parse_workers("auto")
        (4, None)

    """
    if value is None or value == AUTO_WORKERS:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigError(f"expected a number of processes or auto, got {value!r}", "workers")


def _runtime(default: Any) -> Any:
    """A field that changes how a run goes, never its result: a resumed run may change it."""
    return dataclasses.field(default=default, metadata={"runtime": True})


AUTO_WORKERS = "auto"
ALL_LAYERS = "all"
Layers = tuple[int, ...] | Literal["all"]


def parse_layers(spec: str | int | Iterable[int]) -> Layers:
    """Parse a layer selection such as ``"1-4"``, ``"0,2,-1"``, ``[1, 2]`` or ``"all"``.

    Ranges are inclusive and may not mix signs (``"-4--1"`` is the top four layers); ``"all"``
    is the embedding output and every block, whatever the model's depth.

    Example:
        >>> parse_layers("1-3,-1")
        (1, 2, 3, -1)

    """
    if spec == ALL_LAYERS:
        return ALL_LAYERS
    if isinstance(spec, int):
        return (spec,)
    if not isinstance(spec, str):
        return tuple(int(i) for i in spec)
    return tuple(
        layer for item in spec.replace(" ", "").split(",") for layer in _item_layers(item, spec)
    )


def _item_layers(item: str, spec: str) -> range:
    """The layers of one item of ``spec``: an index (``-1``) or a range (``1-4``)."""
    match = _LAYER_ITEM.match(item)
    if not match:
        raise ConfigError(
            f"cannot read {item!r} in {spec!r}; expected indices and ranges like '1-4,-1'",
            field="layers",
        )
    bounds = [bound for bound in match.groups() if bound is not None]
    if any(bound.startswith("-") and int(bound) == 0 for bound in bounds):
        raise ConfigError(
            f"-0 in {spec!r} is ambiguous; write 0 for the embedding output or -1 for the "
            "top layer",
            field="layers",
        )
    start, end = int(bounds[0]), int(bounds[-1])
    if (start < 0) != (end < 0) or end < start:
        raise ConfigError(
            f"range {item!r} must go upwards within one sign, like '1-4'", field="layers"
        )
    return range(start, end + 1)


@dataclass(frozen=True)
class DistillConfig:
    """All options of a distillation run; written into ``meta.json`` and read back unchanged.

    Args:
        model: Hugging Face hub id, local directory or short name (``minilm``) of the encoder.
        layers: Hidden layers to pool (0 is the embedding output, negatives count from the top),
            or ``"all"``. The default, all layers, was chosen by a measured sweep
            (``docs/benchmarks/quality.md``).
        combine: How the chosen layers are combined: ``mean``, ``sum`` or ``concat``.
        pool: How an occurrence's subwords are pooled: ``mean``, ``first``, ``last``, ``max``.
        max_contexts: Occurrences used per entry, in corpus order (0 = all).
        batch_tokens: Token budget of one encoder batch, padding included (default: 8,192 on the
            CPU; on CUDA sized from the free device memory).
        chunk_sentences: Sentences handed to the encoder side at once.
        max_length: Longest encoder input in tokens (default: the model's limit).
        device: ``auto`` picks CUDA, then MPS, then CPU; ``cuda:1`` names a GPU; several, comma
            separated (``cuda:0,cuda:1``), run one encoder on each.
        workers: Processes that read, segment, match and tokenize the corpus; with 1 the pass
            runs in this process. ``auto`` or None (the default): the cores a CUDA encoder
            leaves spare, else 1 (see :func:`~roberta_static.model.threads.auto_workers`). With
            the Ray engine: shard tasks running at once (default: the cluster's CPUs).
        engine: ``local`` runs the pass on this machine; ``ray`` on a Ray cluster (see
            :mod:`roberta_static.engine.ray.engine`).
        ray_address: The Ray cluster to join (``auto``, ``HOST:PORT``); unset: the one this
            process is connected to, or a new local one.
        encoders: Encoder actors on a Ray cluster (default: one per GPU; without GPUs, 1, or
            none on a cluster of this machine alone, where the driver encodes).
        dtype: Encoder weights' dtype; ``auto`` is bfloat16 on CUDA and on a CPU with bfloat16
            units (AMX, AVX512-BF16), float32 elsewhere (see
            :func:`~roberta_static.model.precision.resolve_precision`).
        quantize: ``int8`` runs the encoder's linear layers in int8 on the CPU (those that
            narrow their input stay in float32; see
            :func:`~roberta_static.model.precision.quantize_int8`); with ``dtype="auto"`` the
            rest runs in float32.
        case: ``lower`` matches and stores entries lower-cased; ``keep`` matches exactly.
        lang: Language of the blank spaCy pipeline used for segmentation.
        spacy_model: An installed spaCy pipeline (name or path) to segment with instead.
        text_field: Field holding the text in JSONL corpus files.
        min_count: Without a vocabulary file, keep corpus words seen at least this often.
        max_vocab: Without a vocabulary file, keep at most this many of the most frequent words.
        fill_unseen: ``decontextualized`` embeds entries never seen in the corpus on their own;
            ``mapped`` maps those vectors into the contextual space with a ridge map fitted on
            the seen entries (see :mod:`roberta_static.vectors.fill`).
        sentence_targets: Keep the teacher's sentence vector of up to this many sentences, with
            the entries each holds, for ``tune`` (0: none; see
            :mod:`roberta_static.vectors.targets` for which sentences).
        trust_remote_code: Allow model code from the hub (runs foreign code: off by default).
        allow_pickle: Allow pickled ``.bin`` weights when no safetensors file exists.
        center: Subtract the mean vector from the result.
        remove_top_pcs: Remove this many top principal components (all-but-the-top).
        pca: Reduce the result to this many dimensions.
        normalize: Scale every vector to unit length.

    Example:
        >>> DistillConfig(model="roberta-base", layers="1-4").layers
        (1, 2, 3, 4)

    """

    model: str
    layers: Layers = ALL_LAYERS
    combine: Combine = "mean"
    pool: Pooling = "mean"
    max_contexts: int = 2000
    batch_tokens: int | None = _runtime(None)
    chunk_sentences: int = _runtime(2048)
    max_length: int | None = None
    device: Device = _runtime("auto")
    workers: int | Literal["auto"] | None = _runtime(None)
    engine: Engine = _runtime("local")
    ray_address: str | None = _runtime(None)
    encoders: int | None = _runtime(None)
    dtype: DType = "auto"
    quantize: Quantize = "none"
    case: Case = "lower"
    lang: str = "en"
    spacy_model: str | None = None
    text_field: str = "text"
    min_count: int = 5
    max_vocab: int | None = 100_000
    fill_unseen: FillUnseen = "none"
    sentence_targets: int = 0
    trust_remote_code: bool = _runtime(False)
    allow_pickle: bool = _runtime(False)
    center: bool = False
    remove_top_pcs: int = 0
    pca: int | None = None
    normalize: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", parse_layers(self.layers))
        if not self.layers:
            raise ConfigError("choose at least one layer", field="layers")
        if self.layers != ALL_LAYERS and len(set(self.layers)) != len(self.layers):
            raise ConfigError(f"{list(self.layers)} names a layer twice", field="layers")
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"expected one of {', '.join(allowed)}, got {value!r}", name)
        object.__setattr__(self, "workers", parse_workers(self.workers))
        require_minimums(self, MINIMUMS)
        parse_devices(self.device)
        PostProcessing(self.center, self.remove_top_pcs, self.pca, self.normalize)  # validates
        self._check_quantize()
        if None not in (self.max_length, self.batch_tokens) and self.max_length > self.batch_tokens:
            raise ConfigError(
                f"must hold one sequence of the longest input ({self.max_length} tokens), "
                f"got {self.batch_tokens}",
                field="batch_tokens",
            )

    def _check_quantize(self) -> None:
        """int8 layers run on the CPU, taking float32 inputs."""
        if self.quantize == "none":
            return
        if self.dtype not in ("auto", "float32"):
            raise ConfigError(
                f"{self.quantize} layers take float32 inputs; use dtype float32 or auto, "
                f"not {self.dtype}",
                field="quantize",
            )
        devices = [device for device in self.devices if device not in ("auto", "cpu")]
        if devices:
            raise ConfigError(
                f"{self.quantize} runs on the CPU only, not on {', '.join(devices)}",
                field="quantize",
            )

    @property
    def devices(self) -> list[str]:
        """The device of each encoder (``device`` split at its commas)."""
        return parse_devices(self.device)

    @property
    def postprocessing(self) -> PostProcessing:
        """The post-processing steps these options ask for."""
        return PostProcessing(self.center, self.remove_top_pcs, self.pca, self.normalize)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; ``DistillConfig(**d)`` reads it back."""
        data = dataclasses.asdict(self)
        data["layers"] = self.layers if self.layers == ALL_LAYERS else list(self.layers)
        return data

    def result_options(self) -> dict[str, Any]:
        """The options that change the vectors, as in :meth:`to_dict`; the rest are runtime options.

        Batch size, chunk size, device and the loading permissions change how a run goes, so a
        resumed run may change them; anything else would mix two different results.
        """
        runtime = {f.name for f in dataclasses.fields(self) if f.metadata.get("runtime")}
        return {key: value for key, value in self.to_dict().items() if key not in runtime}

    def replace(self, **changes: Any) -> DistillConfig:
        """Copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)
