from __future__ import annotations

import pytest

from roberta_static.config import DistillConfig, parse_layers
from roberta_static.errors import ConfigError


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("1-4", (1, 2, 3, 4)),
        ("0,2,-1", (0, 2, -1)),
        ("-3--1", (-3, -2, -1)),
        (5, (5,)),
        ([1, 2], (1, 2)),
    ],
)
def test_parse_layers(spec, expected):
    assert parse_layers(spec) == expected


@pytest.mark.parametrize("spec", ["", "a", "4-1", "-1-2", "1,,2"])
def test_parse_layers_rejects(spec):
    with pytest.raises(ConfigError, match="layers"):
        DistillConfig(model="m", layers=spec)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"pool": "median"}, "pool: expected one of mean, first, last, max"),
        ({"max_contexts": -1}, "max_contexts: must be >= 0"),
        ({"layers": "1,1"}, "names a layer twice"),
        ({"max_length": 600, "batch_tokens": 512}, "must hold one sequence"),
        ({"quantize": "int4"}, "quantize: expected one of none, int8"),
        (
            {"quantize": "int8", "dtype": "bfloat16"},
            "quantize: int8 layers take float32 inputs; use dtype float32 or auto, not bfloat16",
        ),
        (
            {"quantize": "int8", "device": "cpu,cuda:1"},
            "quantize: int8 runs on the CPU only, not on cuda:1",
        ),
    ],
)
def test_config_validation(changes, message):
    with pytest.raises(ConfigError, match=message):
        DistillConfig(model="m", **changes)


def test_round_trip_through_dict():
    config = DistillConfig(model="m", layers="2-3", combine="concat")
    assert DistillConfig(**config.to_dict()) == config


def test_all_layers_is_the_default_and_resolves_per_model():
    from roberta_static.model.encoder import resolve_layers

    config = DistillConfig(model="m")
    assert config.layers == "all" and config.to_dict()["layers"] == "all"
    assert DistillConfig(**config.to_dict()) == config
    assert resolve_layers(config.layers, 6) == (0, 1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"max_contexts": -3}, "max_contexts"),
        ({"batch_tokens": 0}, "batch_tokens"),
        ({"chunk_sentences": 0}, "chunk_sentences"),
        ({"max_length": 0}, "max_length"),
        ({"min_count": 0}, "min_count"),
        ({"max_vocab": 0}, "max_vocab"),
        ({"remove_top_pcs": -1}, "remove_top_pcs"),
        ({"pca": 0}, "pca"),
        ({"layers": "2-1"}, "layers"),
        ({"pool": "median"}, "pool"),
        ({"max_length": 600, "batch_tokens": 512}, "batch_tokens"),
    ],
)
def test_errors_name_the_option_at_fault(changes, field):
    with pytest.raises(ConfigError) as caught:
        DistillConfig(model="m", **changes)
    assert caught.value.field == field
    assert str(caught.value) == f"{field}: {caught.value.problem}"


@pytest.mark.parametrize("spec", ["-0", "1,-0", "-3--0", "-00"])
def test_minus_zero_is_refused_rather_than_read_as_layer_0(spec):
    with pytest.raises(ConfigError, match="layers: -0 in .* is ambiguous; write 0 .* or -1"):
        DistillConfig(model="m", layers=spec)


def test_max_length_leaves_room_for_two_tokens_of_text():
    with pytest.raises(ConfigError, match="max_length: must be >= 2, got 1"):
        DistillConfig(model="m", max_length=1)
    assert DistillConfig(model="m", max_length=2).max_length == 2


@pytest.mark.parametrize(("given", "workers"), [("auto", None), (None, None), ("4", 4), (2, 2)])
def test_workers_are_a_count_or_auto(given, workers):
    assert DistillConfig(model="m", workers=given).workers == workers


@pytest.mark.parametrize("given", ["x", "-1", 2.5, True, 0])
def test_workers_that_are_no_count_are_refused(given):
    with pytest.raises(
        ConfigError, match=r"workers: (expected a number of processes or auto|must be >= 1)"
    ):
        DistillConfig(model="m", workers=given)
