"""What ``--dtype auto`` picks on each device and CPU, with the CPU's units faked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from roberta_static.errors import ConfigError
from roberta_static.model import precision
from roberta_static.model.precision import (
    cpu_bfloat16_units,
    quantize_int8,
    resolve_precision,
)

CPU, CUDA, MPS = torch.device("cpu"), torch.device("cuda"), torch.device("mps")
AMX = {"amx_bf16": True, "amx_tile": True, "avx512_bf16": True, "avx2": True}
AVX512_BF16 = {"amx_bf16": False, "avx512_bf16": True, "avx2": True}
AVX2_ONLY = {"amx_bf16": False, "avx512_bf16": False, "avx2": True}


def fake_cpu(monkeypatch: pytest.MonkeyPatch, features: dict, onednn: bool = True) -> None:
    """Make torch report ``features`` for the CPU, and oneDNN as built in, uncapped, or not."""
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: features, raising=False)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: onednn)
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "features,dtype,reason",
    [
        (AMX, torch.bfloat16, "auto: the CPU has bfloat16 matrix units (AMX)"),
        (
            AVX512_BF16,
            torch.float32,
            "auto: float32 runs faster than bfloat16 on bfloat16 vector units (AVX512-BF16) alone",
        ),
        (AVX2_ONLY, torch.float32, "auto: the CPU has no bfloat16 units (no AMX, AVX512-BF16)"),
        ({}, torch.float32, "auto: the CPU has no bfloat16 units (no AMX, AVX512-BF16)"),
    ],
)
def test_auto_on_a_cpu_is_bfloat16_only_with_amx(monkeypatch, features, dtype, reason):
    fake_cpu(monkeypatch, features)
    chosen = resolve_precision("auto", CPU)
    assert (chosen.dtype, chosen.reason) == (dtype, reason)


@pytest.mark.parametrize(
    "variable,cap,dtype,reason",
    [
        (
            "ONEDNN_MAX_CPU_ISA",
            "AVX512_CORE_VNNI",
            torch.float32,
            "auto: ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI keeps oneDNN from bfloat16 matrix units (AMX)",
        ),
        (
            "DNNL_MAX_CPU_ISA",
            "avx2",
            torch.float32,
            "auto: DNNL_MAX_CPU_ISA=avx2 keeps oneDNN from bfloat16 matrix units (AMX)",
        ),
        (
            "ONEDNN_MAX_CPU_ISA",
            "avx512_core_bf16",
            torch.float32,
            "auto: float32 runs faster than bfloat16 on bfloat16 vector units (AVX512-BF16) alone",
        ),
        (
            "ONEDNN_MAX_CPU_ISA",
            "AVX10_1_512_AMX",
            torch.bfloat16,
            "auto: the CPU has bfloat16 matrix units (AMX)",
        ),
        (
            "ONEDNN_MAX_CPU_ISA",
            "ALL",
            torch.bfloat16,
            "auto: the CPU has bfloat16 matrix units (AMX)",
        ),
        # A name oneDNN does not know: oneDNN ignores it, and so does auto.
        (
            "ONEDNN_MAX_CPU_ISA",
            "AVX9000",
            torch.bfloat16,
            "auto: the CPU has bfloat16 matrix units (AMX)",
        ),
    ],
)
def test_auto_on_a_cpu_uses_only_the_units_onednn_is_allowed(
    monkeypatch, variable, cap, dtype, reason
):
    fake_cpu(monkeypatch, AMX)
    monkeypatch.setenv(variable, cap)
    chosen = resolve_precision("auto", CPU)
    assert (chosen.dtype, chosen.reason) == (dtype, reason)


def test_auto_on_a_cpu_stays_float32_when_torch_lacks_onednn(monkeypatch):
    fake_cpu(monkeypatch, AMX, onednn=False)
    assert resolve_precision("auto", CPU).dtype == torch.float32


def test_units_are_read_from_older_torch_probes(monkeypatch):
    fake_cpu(monkeypatch, {})
    monkeypatch.delattr(torch.cpu, "get_capabilities")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert cpu_bfloat16_units() == "bfloat16 vector units (AVX512-BF16)"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert cpu_bfloat16_units() == "bfloat16 matrix units (AMX)"
    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        monkeypatch.delattr(torch.cpu, probe)
    assert cpu_bfloat16_units() is None
    assert resolve_precision("auto", CPU).dtype == torch.float32


@pytest.mark.parametrize("bf16,dtype", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_is_half_precision(monkeypatch, bf16, dtype):
    fake_cpu(monkeypatch, AVX2_ONLY)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
    assert resolve_precision("auto", CUDA).dtype == dtype


def test_auto_on_mps_is_float32(monkeypatch):
    fake_cpu(monkeypatch, AMX)
    assert resolve_precision("auto", MPS) == precision.Precision(
        torch.float32, "auto: float32 on mps"
    )


@pytest.mark.parametrize("features", [AMX, AVX2_ONLY])
@pytest.mark.parametrize("asked", ["float32", "bfloat16", "float16"])
def test_an_explicit_dtype_is_kept_whatever_the_cpu(monkeypatch, features, asked):
    fake_cpu(monkeypatch, features)
    chosen = resolve_precision(asked, CPU)
    assert (chosen.name, chosen.reason) == (asked, "asked for")


def test_the_real_cpu_gets_an_answer():
    """Whatever this machine is, the probes run and agree with ``auto``'s choice."""
    amx = cpu_bfloat16_units() == precision.CPU_BFLOAT16_UNITS["amx_bf16"]
    assert resolve_precision("auto", CPU).dtype == (torch.bfloat16 if amx else torch.float32)


def test_int8_quantizes_a_copy_leaving_layers_that_narrow_their_input(roberta_dir):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(roberta_dir)
    quantized = quantize_int8(model, CPU)
    linear = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    narrowing = {n for n, m in linear.items() if m.in_features > m.out_features}
    assert narrowing and len(narrowing) < len(linear)  # the feed-forward down-projections
    kept = {n for n, m in quantized.named_modules() if type(m) is torch.nn.Linear}
    assert kept == narrowing
    assert all(type(m) is torch.nn.Linear for m in model.modules() if "Linear" in type(m).__name__)
    with pytest.raises(ConfigError, match="quantize: int8 runs on the CPU only, not on cuda"):
        quantize_int8(model, CUDA)


def test_auto_is_float32_around_int8_layers(monkeypatch):
    fake_cpu(monkeypatch, AMX)
    chosen = resolve_precision("auto", CPU, quantize="int8")
    assert (chosen.name, chosen.reason) == (
        "float32",
        "auto: float32 around the int8 linear layers",
    )


@pytest.mark.parametrize("user_value", [None, "512"])
def test_an_encoder_on_the_cpu_bounds_onednns_kernel_caches(model_dir, monkeypatch, user_value):
    from roberta_static.config import DistillConfig
    from roberta_static.model.encoder import Encoder
    from roberta_static.model.loading import load_pretrained

    for variable in precision.ONEDNN_CACHE_VARIABLES:
        monkeypatch.setenv(variable, user_value or "")  # restored after the test
        if user_value is None:
            monkeypatch.delenv(variable)
    config = DistillConfig(model=str(model_dir), device="cpu", dtype="bfloat16")
    Encoder(*load_pretrained(config), config)
    expected = user_value or str(precision.ONEDNN_CACHE_SHAPES)
    assert [os.environ[v] for v in precision.ONEDNN_CACHE_VARIABLES] == [expected] * 2


GROWTH_SCRIPT = """
import re, sys
from pathlib import Path
import torch
from roberta_static.model.precision import bound_onednn_caches
if sys.argv[1] == "bounded":
    bound_onednn_caches()
def resident():
    text = Path("/proc/self/smaps_rollup").read_text()
    return int(re.search(r"^Rss:\\s+(\\d+)", text, re.MULTILINE).group(1)) * 1024
torch.set_num_threads(1)
layer = torch.nn.Linear(32, 128).to(torch.bfloat16)
with torch.inference_mode():
    layer(torch.ones(1, 4, 32, dtype=torch.bfloat16))
    before = resident()
    for rows in range(1, 301):  # a pass's batches: a new shape each
        layer(torch.ones(rows, 7, 32, dtype=torch.bfloat16))
print(resident() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="reads Linux's /proc")
def test_bounded_caches_keep_bfloat16_products_of_many_shapes_from_growing_the_process():
    def growth(mode: str) -> int:
        # A process of its own: oneDNN reads its cache sizes once, at its first product.
        env = {k: v for k, v in os.environ.items() if k not in precision.ONEDNN_CACHE_VARIABLES}
        script = [sys.executable, "-c", GROWTH_SCRIPT, mode]
        return int(subprocess.run(script, env=env, capture_output=True, check=True).stdout)

    unbounded = growth("unbounded")
    if unbounded < 20 * 2**20:
        pytest.skip(f"oneDNN's caches grew {unbounded / 2**20:.1f} MB here: nothing to bound")
    assert growth("bounded") < unbounded / 4
