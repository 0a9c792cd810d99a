"""Fixtures: tiny RoBERTa and BERT models built at test time, saved with save_pretrained."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# One torch thread, here and in the processes the tests start (the CLI, workers, Ray): the tiny
# models' operations take microseconds, and torch's spinning thread pool, competing for 2 busy
# cores with pytest, the producer thread and subprocesses, made them take a millisecond each (a
# test with many small batches ran 108 s instead of 1.4 s). Set before torch is first imported.
os.environ["OMP_NUM_THREADS"] = "1"
# The expected values are float32's, so ``--dtype auto`` is float32 on every CPU the suite runs on,
# with bfloat16 units (AMX, AVX512-BF16) or without: oneDNN is capped below them, here and in the
# processes the tests start. Tests of bfloat16 ask for it; tests of ``auto`` fake the CPU.
os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE_VNNI"

CORPUS_LINES = [
    "The cat sat on the mat. Paris is a city in France, and Paris is large.",
    "A dog chased the cat across the garden in New York.",
    "PARIS was quiet. The distillation of knowledge from transformers is useful.",
    "New York and Paris are cities; the cat lives in new york with a dog.",
    "The dog, the cat and the bird are friends in the garden.",
    # Longer than the models' 64-token limit: read through overlapping windows.
    " ".join(
        ["The garden behind the house is green and the dog runs around the garden"] * 6
        + ["until the cat sleeps in the sun near Paris."]
    ),
]
VOCAB_ENTRIES = [
    "cat",
    "dog",
    "Paris",
    "garden",
    "distillation",
    "transformers",
    "new york",
    "zebra",
]
MAX_LENGTH = 64
TINY_SIZES = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


def _train_lines() -> list[str]:
    return CORPUS_LINES * 20 + ["zebra quantum spectroscopy", "The sun is bright."] * 5


def build_roberta(folder: Path) -> Path:
    """A 2-layer, 32-wide RoBERTa with a byte-level BPE tokenizer trained on the test corpus."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _train_lines(),
        vocab_size=300,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizerFast(
        str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=MAX_LENGTH
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        **TINY_SIZES,
        max_position_embeddings=MAX_LENGTH + 2,
        pad_token_id=tokenizer.pad_token_id,
    )
    RobertaModel(config).eval().save_pretrained(folder)
    return folder


def build_bert(folder: Path) -> Path:
    """A 2-layer, 32-wide BERT with a WordPiece tokenizer trained on the test corpus."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(_train_lines(), vocab_size=150, min_frequency=1)
    wordpiece.save_model(str(folder))
    tokenizer = BertTokenizerFast(str(folder / "vocab.txt"), model_max_length=MAX_LENGTH)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(tokenizer),
        **TINY_SIZES,
        max_position_embeddings=MAX_LENGTH,
    )
    BertModel(config).eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def roberta_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session", params=["roberta", "bert"])
def model_dir(request: pytest.FixtureRequest, roberta_dir: Path, bert_dir: Path) -> Path:
    return roberta_dir if request.param == "roberta" else bert_dir


@pytest.fixture()
def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS_LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def vocab_file(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB_ENTRIES) + "\n", encoding="utf-8")
    return path


# `roberta-static ARGS` in which TARGET (module:attribute), once its first call has returned,
# touches $PAUSED/paused and waits for $PAUSED/go before returning.
_PAUSED_COMMAND = """
import importlib, os, sys, time
from pathlib import Path
from roberta_static.cli import main
module, _, path = sys.argv.pop(1).partition(":")
*owners, name = path.split(".")
owner = importlib.import_module(module)
for part in owners:
    owner = getattr(owner, part)
original, folder = getattr(owner, name), Path(os.environ["PAUSED"])
def paused(*args, **kwargs):
    result = original(*args, **kwargs)
    setattr(owner, name, original)
    (folder / "paused").touch()
    while not (folder / "go").exists():
        time.sleep(0.01)
    return result
setattr(owner, name, paused)
sys.argv[0] = "roberta-static"
main()
"""


class PausedRun:
    """A command that pauses once TARGET first returns, so a test signals it at a known state.

    A run that would otherwise finish before the signal arrives cannot: the test waits for the
    pause (a state, not a time), sends its signal, then lets the run go on to handle it.
    """

    def __init__(self, args: list[str], target: str, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PAUSED_COMMAND, target, *map(str, args[1:])],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PAUSED": str(folder)},
        )

    def signal(self, signum: signal.Signals, timeout: float = 120) -> str:
        """Wait for the pause, send ``signum``, let the run go on; its stderr once it ends."""
        deadline = time.monotonic() + timeout
        while not (self.folder / "paused").exists():
            assert self.process.poll() is None, self.process.communicate()[1]
            assert time.monotonic() < deadline, "the run never reached its pause"
            time.sleep(0.01)
        os.kill(self.process.pid, signum)
        (self.folder / "go").touch()
        return self.process.communicate(timeout=timeout)[1]


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A stopped CLI run keeps the default signal actions until its process exits (a second
    Ctrl-C then ends it); run in-process by a test, the handlers come back for the next test."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
