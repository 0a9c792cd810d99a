from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from torch.overrides import TorchFunctionMode
from transformers import AutoModel

from roberta_static.config import DistillConfig
from roberta_static.errors import ConfigError, ModelLoadError
from roberta_static.model.batches import Batch, EncoderInput, padded
from roberta_static.model.encoder import resolve_layers, truncate_layers
from roberta_static.model.loading import load_pretrained


def test_truncated_model_gives_the_same_states_and_leaves_the_original_whole(model_dir):
    model = AutoModel.from_pretrained(model_dir).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        full = model(ids, output_hidden_states=True).hidden_states
        short = truncate_layers(model, 1)(ids, output_hidden_states=True).hidden_states
    assert len(short) == 2
    torch.testing.assert_close(short[1], full[1])
    assert model.config.num_hidden_layers == 2
    with torch.no_grad():
        assert len(model(ids, output_hidden_states=True).hidden_states) == 3


@pytest.mark.parametrize("layers", ["0", "0,1", "1", "-1"])
def test_encoder_states_are_the_full_models_chosen_hidden_states(model_dir, layers):
    from roberta_static.model.batches import Batch
    from roberta_static.model.encoder import Encoder

    model, tokenizer = load_pretrained(DistillConfig(model=str(model_dir)))
    ids = np.array([[0, 5, 6, 7, 2], [0, 8, 9, 2, 1]])
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    with torch.no_grad():
        full = model(torch.from_numpy(ids), torch.from_numpy(mask), output_hidden_states=True)
    config = DistillConfig(model=str(model_dir), layers=layers, device="cpu", dtype="float32")
    encoder = Encoder(model, tokenizer, config)
    empty = np.zeros(0, dtype=np.int64)
    states = encoder.hidden_states(Batch(ids, mask, empty, empty, empty, empty))
    expected = torch.stack([full.hidden_states[layer] for layer in encoder.layers])
    torch.testing.assert_close(states, expected)


def test_layer_range_error_gives_valid_range():
    assert resolve_layers((0, -1, 2), 12) == (0, 12, 2)
    with pytest.raises(
        ConfigError, match=r"layers: \[13\] out of range; this model has layers 0-12"
    ):
        resolve_layers((13,), 12)


def test_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelLoadError, match="cannot load a model .the folder has no config.json"):
        load_pretrained(DistillConfig(model=str(tmp_path)))
    with pytest.raises(ModelLoadError, match="found a file"):
        load_pretrained(DistillConfig(model=str(tmp_path / "notes.txt")))


def test_a_damaged_weights_file_is_a_one_line_error(roberta_dir, tmp_path):
    for source in roberta_dir.iterdir():
        (tmp_path / source.name).write_bytes(source.read_bytes())
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(
        ModelLoadError, match=f"{tmp_path}: cannot load a model \\(Error while deserializing header"
    ):
        load_pretrained(DistillConfig(model=str(tmp_path)))


def test_pickled_weights_need_opt_in(roberta_dir, tmp_path):
    for source in roberta_dir.iterdir():
        if source.name != "model.safetensors":
            (tmp_path / source.name).write_bytes(source.read_bytes())
    torch.save(AutoModel.from_pretrained(roberta_dir).state_dict(), tmp_path / "pytorch_model.bin")
    assert not (tmp_path / "model.safetensors").exists()
    with pytest.raises(ModelLoadError, match="only pickled weights .* pass --allow-pickle"):
        load_pretrained(DistillConfig(model=str(tmp_path)))
    loaded, _ = load_pretrained(DistillConfig(model=str(tmp_path), allow_pickle=True))
    assert loaded.config.num_hidden_layers == 2


def test_model_needing_remote_code_is_refused_without_running_it(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"model_type": "my-custom", "auto_map": {"AutoConfig": "configuration_x.XConfig", '
        '"AutoModel": "modeling_x.XModel"}}'
    )
    marker = tmp_path / "ran.txt"
    for name in ("configuration_x.py", "modeling_x.py"):
        (tmp_path / name).write_text(f"open({str(marker)!r}, 'w').write('foreign code ran')\n")
    with pytest.raises(ModelLoadError, match="contains custom code.* pass --trust-remote-code"):
        load_pretrained(DistillConfig(model=str(tmp_path)))
    assert not marker.exists()


def test_unavailable_device_and_too_long_max_length(roberta_dir):
    from roberta_static.model.encoder import Encoder, resolve_device

    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device: cuda is not available"):
            resolve_device("cuda")
    model, tokenizer = load_pretrained(DistillConfig(model=str(roberta_dir)))
    with pytest.raises(ConfigError, match="max_length: 100 exceeds this model's limit of 64"):
        Encoder(model, tokenizer, DistillConfig(model=str(roberta_dir), max_length=100))


def test_tokenizer_without_a_fast_version_is_refused(roberta_dir):
    from transformers import RobertaTokenizer

    from roberta_static.model.encoder import Encoder

    slow = RobertaTokenizer.from_pretrained(roberta_dir)
    if slow.is_fast:
        pytest.skip("this transformers version has no Python (slow) RoBERTa tokenizer")
    model = AutoModel.from_pretrained(roberta_dir)
    with pytest.raises(ModelLoadError, match="tokenizer RobertaTokenizer has no fast"):
        Encoder(model, slow, DistillConfig(model=str(roberta_dir)))


def test_batch_budget_is_8192_on_cpu_and_sized_from_free_memory_on_cuda(roberta_dir, monkeypatch):
    from roberta_static.model import encoder as encoder_module
    from roberta_static.model.encoder import (
        Encoder,
        activation_bytes_per_token,
        resolve_batch_tokens,
    )

    model, tokenizer = load_pretrained(DistillConfig(model=str(roberta_dir)))
    config = DistillConfig(model=str(roberta_dir), layers="1-2", device="cpu", dtype="float32")
    encoder = Encoder(model, tokenizer, config)
    assert encoder.batch_tokens == 8192
    assert resolve_batch_tokens(300, encoder) == 300
    # Every hidden state to layer 2, one block's activations twice, two layers stacked in float32.
    assert activation_bytes_per_token(encoder) == 3 * 32 * 4 + 2 * (3 * 32 + 64) * 4 + 2 * 32 * 8
    encoder.device = torch.device("cuda")  # only the free memory is asked of it
    monkeypatch.setattr(encoder_module, "free_memory", lambda device: 10 * 2**20)
    per_token = activation_bytes_per_token(encoder)
    assert resolve_batch_tokens(None, encoder) == (5 * 2**20 // per_token) // 1024 * 1024
    monkeypatch.setattr(encoder_module, "free_memory", lambda device: 80 * 2**30)
    assert resolve_batch_tokens(None, encoder) == 131_072
    monkeypatch.setattr(encoder_module, "free_memory", lambda device: 1000)
    assert resolve_batch_tokens(None, encoder) == encoder.max_length


@pytest.mark.parametrize("bars_on", [True, False])
def test_loading_prints_nothing_and_leaves_transformers_bars_as_they_were(
    roberta_dir, capfd, bars_on
):
    from transformers.utils import logging as hf_logging

    (hf_logging.enable_progress_bar if bars_on else hf_logging.disable_progress_bar)()
    capfd.readouterr()
    load_pretrained(DistillConfig(model=str(roberta_dir)))
    captured = capfd.readouterr()
    assert "Loading" not in captured.err and captured.out == ""
    assert hf_logging.is_progress_bar_enabled() == bars_on
    hf_logging.enable_progress_bar()


@pytest.mark.parametrize(
    "options,message",
    [
        ({"layers": "-100"}, r"layers: \[-100\] out of range; this model has layers 0-2"),
        (
            {"max_length": 3},
            "max_length: 3 leaves 1 of the 2 tokens of text a window needs beside this model's "
            "2 special tokens; use at least 4",
        ),
    ],
)
def test_options_the_model_cannot_serve_fail_before_its_weights_load(
    roberta_dir, monkeypatch, options, message
):
    import transformers

    class NoWeights:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            raise AssertionError("the weights were loaded")

    monkeypatch.setattr(transformers, "AutoModel", NoWeights)
    with pytest.raises(ConfigError, match=message):
        load_pretrained(DistillConfig(model=str(roberta_dir), **options))


def test_an_encoder_with_no_room_beside_the_special_tokens_is_a_config_error(roberta_dir):
    from roberta_static.model.encoder import Encoder

    model, tokenizer = load_pretrained(DistillConfig(model=str(roberta_dir)))
    with pytest.raises(ConfigError, match="max_length: 3 leaves 1 of the 2 tokens of text"):
        Encoder(model, tokenizer, DistillConfig(model=str(roberta_dir), max_length=3))
    assert Encoder(model, tokenizer, DistillConfig(model=str(roberta_dir), max_length=4))


class DeviceWaits(TorchFunctionMode):
    """Records the torch calls that make the host wait for the device (on CUDA)."""

    READS = {
        torch.Tensor.__bool__,
        torch.Tensor.__int__,
        torch.Tensor.__float__,
        torch.Tensor.__index__,
        torch.Tensor.item,
        torch.Tensor.tolist,
        torch.Tensor.cpu,
        torch.Tensor.numpy,
        torch.Tensor.nonzero,
        torch.nonzero,
        torch.Tensor.masked_select,
        torch.masked_select,
        torch.Tensor.unique,
        torch.unique,
    }

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (func in self.READS and not _of_pinned_memory(args)) or _sized_by_the_device(
            func, args, kwargs
        ):
            self.calls.append(func.__name__)
        return func(*args, **kwargs)


def _of_pinned_memory(args) -> bool:
    """A read of page-locked host memory (CUDA's staging buffers) waits for nothing."""
    return bool(args) and isinstance(args[0], torch.Tensor) and args[0].is_pinned()


def _sized_by_the_device(func, args, kwargs) -> bool:
    """repeat_interleave by tensor repeats without output_size; indexing by a boolean tensor."""
    if func in (torch.repeat_interleave, torch.Tensor.repeat_interleave):
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        return isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None
    if func is torch.Tensor.__getitem__:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)
    return False


def _two_batches(pad_id: int) -> list[Batch]:
    """A batch with padding and one without, each with occurrences of one and several subwords."""
    rng = np.random.default_rng(0)
    inputs = [
        EncoderInput(rng.integers(5, 60, length), np.array([[1, 2, 0], [2, 5, length % 3]]))
        for length in (12, 15)
    ]
    return [padded(inputs, pad_id), padded(inputs[1:], pad_id)]


@pytest.mark.parametrize("dtype,waits", [("float32", 0), ("bfloat16", 1)])
def test_a_batch_waits_for_the_device_once_in_half_precision_and_never_in_float32(
    model_dir, dtype, waits
):
    from roberta_static.engine.stats import RunStats
    from roberta_static.engine.step import add_batch
    from roberta_static.model.encoder import Encoder
    from roberta_static.model.pooling import Accumulator

    config = DistillConfig(model=str(model_dir), dtype=dtype)
    encoder = Encoder(*load_pretrained(config), config)
    if not encoder.prepared_masks:  # older transformers check the 2D mask on the host
        waits += 1
    for pool in ("mean", "max", "first"):
        for batch in _two_batches(encoder.subwords.pad_id):
            accumulator = Accumulator(3, encoder.output_dim("mean"), encoder.device)
            with DeviceWaits() as recorded:
                add_batch(encoder, batch, accumulator, config.replace(pool=pool), RunStats())
            assert len(recorded.calls) == waits, (pool, recorded.calls)


def test_prepared_masks_give_the_states_the_2d_mask_gives(model_dir):
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(model_dir), device="cpu", dtype="float32")
    model, tokenizer = load_pretrained(config)
    encoder = Encoder(model, tokenizer, config)
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert encoder.prepared_masks
    for batch in _two_batches(encoder.subwords.pad_id):
        ids, mask = torch.from_numpy(batch.input_ids), torch.from_numpy(batch.attention_mask)
        with torch.inference_mode():
            full = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        expected = torch.stack([full.hidden_states[layer] for layer in encoder.layers])
        assert torch.equal(encoder.hidden_states(batch), expected)


def test_staging_on_the_cpu_shares_the_arrays_memory():
    from roberta_static.model.staging import Staging

    arrays = [np.arange(6).reshape(2, 3), np.arange(4)[::2]]
    moved = Staging(torch.device("cpu")).move(arrays)
    assert moved[0].data_ptr() == arrays[0].ctypes.data and not moved[0].is_pinned()
    assert [t.tolist() for t in moved] == [a.tolist() for a in arrays]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_staging_on_cuda_copies_through_reused_pinned_buffers_grown_as_needed():
    from roberta_static.model.staging import Staging

    staging = Staging(torch.device("cuda"))
    for size in (3, 1000, 5, 4000, 2):  # each buffer grows once, then is reused
        arrays = [np.arange(size * 2).reshape(2, size), np.arange(size) * 7, np.zeros(0, int)]
        moved = staging.move(arrays)
        assert [t.cpu().tolist() for t in moved] == [a.tolist() for a in arrays]
    assert all(buffer.is_pinned() for buffer in staging._buffers)
