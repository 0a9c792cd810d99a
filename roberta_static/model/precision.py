"""The encoder's number formats: the dtype ``auto`` picks on this device (and why), and int8.

On a CPU, bfloat16 pays only where the CPU computes it natively, and only Intel AMX's matrix units
make it faster than float32: through the AVX512-BF16 vector instructions alone (AMD Zen 4, Intel
Cooper Lake) it ran slower, and elsewhere torch emulates it, several times slower (see
``docs/benchmarks/throughput.md``). Which units there are is read from what torch reports, never
from a list of CPU names, less those that oneDNN is told not to use (``ONEDNN_MAX_CPU_ISA``).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# The features torch reports (``torch.cpu.get_capabilities``) that compute bfloat16 natively,
# best first, and how a user would name them.
CPU_BFLOAT16_UNITS = {
    "amx_bf16": "bfloat16 matrix units (AMX)",
    "avx512_bf16": "bfloat16 vector units (AVX512-BF16)",
}
# oneDNN's instruction-set levels (its ``dnnl_cpu_isa_t`` values: each holds the bits of the levels
# below it), which ONEDNN_MAX_CPU_ISA names; below a unit's level oneDNN emulates bfloat16.
ONEDNN_ISA_LEVELS = {
    "SSE41": 0x1,
    "AVX": 0x3,
    "AVX2": 0x7,
    "AVX2_VNNI": 0xF,
    "AVX2_VNNI_2": 0x1F,
    "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67,
    "AVX512_CORE_BF16": 0xE7,
    "AVX10_1_512": 0x1EF,
    "AVX512_CORE_FP16": 0x1EF,
    "AVX10_1_512_AMX": 0xFEF,
    "AVX512_CORE_AMX": 0xFEF,
    "AVX10_1_512_AMX_FP16": 0x1FEF,
    "AVX512_CORE_AMX_FP16": 0x1FEF,
}
_UNIT_LEVELS = {
    "amx_bf16": ONEDNN_ISA_LEVELS["AVX512_CORE_AMX"],
    "avx512_bf16": ONEDNN_ISA_LEVELS["AVX512_CORE_BF16"],
}
# Older torch has no ``get_capabilities``, only these private probes (AMX's tiles come with its
# bfloat16 unit on every CPU that has them).
_OLDER_PROBES = {"amx_bf16": "_is_amx_tile_supported", "avx512_bf16": "_is_avx512_bf16_supported"}
# oneDNN keeps the kernels it compiled for each shape of matrix product, up to 1,024 shapes in
# each of two caches (ideep's and its own), which read these variables. A pass's batches come in
# hundreds of shapes, so in bfloat16 those caches grew a process by hundreds of megabytes over a
# run; holding a handful cost no measurable CPU time (docs/benchmarks/throughput.md, Scale).
ONEDNN_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
ONEDNN_CACHE_SHAPES = 16


@dataclass(frozen=True)
class Precision:
    """The dtype an encoder runs in, and why it was chosen.

    Attributes:
        dtype: The model's weights' dtype.
        reason: Why, in words: ``"asked for"``, or what ``auto`` found on the device.

    """

    dtype: torch.dtype
    reason: str

    @property
    def name(self) -> str:
        """The dtype as ``--dtype`` spells it (``bfloat16``)."""
        return str(self.dtype).removeprefix("torch.")


def resolve_precision(requested: str, device: torch.device, quantize: str = "none") -> Precision:
    """The dtype ``requested`` means on ``device``, with the reason for it.

    ``auto`` is bfloat16 on CUDA (float16 where the GPU lacks bfloat16), bfloat16 on a CPU with
    AMX that oneDNN may use (:func:`cpu_bfloat16_units`), and float32 everywhere else, or wherever
    the linear layers are quantized to int8 (``quantize``): those take float32 inputs.

    Example:
        >>> resolve_precision("float32", torch.device("cpu"))
        Precision(dtype=torch.float32, reason='asked for')

    """
    if requested != "auto":
        return Precision(DTYPES[requested], "asked for")
    if quantize != "none":
        return Precision(torch.float32, f"auto: float32 around the {quantize} linear layers")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Precision(torch.bfloat16, "auto: the GPU computes bfloat16")
        return Precision(torch.float16, "auto: the GPU lacks bfloat16")
    if device.type != "cpu":
        return Precision(torch.float32, f"auto: float32 on {device.type}")
    return _auto_on_the_cpu()


def _auto_on_the_cpu() -> Precision:
    units = cpu_bfloat16_units()
    if units == CPU_BFLOAT16_UNITS["amx_bf16"]:
        return Precision(torch.bfloat16, f"auto: the CPU has {units}")
    if units is not None:
        return Precision(torch.float32, f"auto: float32 runs faster than bfloat16 on {units} alone")
    setting, units = onednn_isa_cap_setting(), cpu_bfloat16_units(within_isa_cap=False)
    if setting is not None and units is not None:
        variable, cap = setting
        return Precision(torch.float32, f"auto: {variable}={cap} keeps oneDNN from {units}")
    return Precision(torch.float32, "auto: the CPU has no bfloat16 units (no AMX, AVX512-BF16)")


def cpu_bfloat16_units(*, within_isa_cap: bool = True) -> str | None:
    """The CPU's units that compute bfloat16 natively, in words, or None where it has none.

    Only when torch runs its CPU matrix products through oneDNN, which is what uses them, and
    (``within_isa_cap``) only units at or below the level ``ONEDNN_MAX_CPU_ISA`` allows oneDNN.
    """
    if not torch.backends.mkldnn.is_available():
        return None
    capabilities = cpu_capabilities()
    cap = _onednn_isa_cap() if within_isa_cap else None
    return next(
        (
            units
            for name, units in CPU_BFLOAT16_UNITS.items()
            if capabilities.get(name)
            and (cap is None or cap & _UNIT_LEVELS[name] == _UNIT_LEVELS[name])
        ),
        None,
    )


def _onednn_isa_cap() -> int | None:
    """The instruction-set level ``ONEDNN_MAX_CPU_ISA`` caps oneDNN at, or None where uncapped.

    The older name ``DNNL_MAX_CPU_ISA`` counts too. ``ALL``, ``DEFAULT``, levels newer than
    :data:`ONEDNN_ISA_LEVELS` and names oneDNN does not know (which it ignores) cap none of the
    bfloat16 units.
    """
    setting = onednn_isa_cap_setting()
    return ONEDNN_ISA_LEVELS.get(setting[1].strip().upper()) if setting else None


def onednn_isa_cap_setting() -> tuple[str, str] | None:
    """The variable that caps oneDNN's instruction set and its value, or None where unset.

    ``ONEDNN_MAX_CPU_ISA`` first, then the older ``DNNL_MAX_CPU_ISA``, as oneDNN reads them.
    """
    for variable in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        if os.environ.get(variable):
            return variable, os.environ[variable]
    return None


def bound_onednn_caches() -> None:
    """Hold oneDNN's kernel caches to :data:`ONEDNN_CACHE_SHAPES`, unless the user sized them.

    The setting holds for this process and those it starts. oneDNN reads the sizes once, at its
    first matrix product: this has effect only before it.
    """
    for variable in ONEDNN_CACHE_VARIABLES:
        os.environ.setdefault(variable, str(ONEDNN_CACHE_SHAPES))


def cpu_capabilities() -> dict[str, Any]:
    """The CPU's features as this torch reports them (``{"amx_bf16": True, ...}``).

    Features this torch cannot probe are left out, so they read as missing.
    """
    report = getattr(torch.cpu, "get_capabilities", None)
    if report is not None:
        return dict(report())
    return {
        name: bool(getattr(torch.cpu, probe)())
        for name, probe in _OLDER_PROBES.items()
        if hasattr(torch.cpu, probe)
    }


def quantize_int8(model: nn.Module, device: torch.device) -> nn.Module:
    """A copy of ``model`` whose linear layers compute in int8, the caller's model left as it is.

    Weights are quantized per output channel, each batch's activations per tensor on the fly
    (torch's dynamic quantization, on the CPU only). Layers that narrow their input (the
    feed-forward blocks' down-projection) stay in float32: their input, the activation's
    output, has outliers that one scale per tensor loses (``docs/benchmarks/throughput.md`` shows
    what quantizing them too costs the scores).

    Raises:
        ConfigError: ``device`` is not the CPU, or this torch has no dynamic quantization.

    """
    if device.type != "cpu":
        raise ConfigError(f"int8 runs on the CPU only, not on {device}", field="quantize")
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError:
        raise ConfigError(
            f"torch {torch.__version__} has no torch.ao.quantization.quantize_dynamic",
            field="quantize",
        ) from None
    widening = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and module.in_features <= module.out_features
    }
    with warnings.catch_warnings():  # its deprecation notice is for torch's developers
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, widening, dtype=torch.qint8)
