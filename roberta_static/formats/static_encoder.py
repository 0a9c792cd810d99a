"""model2vec and sentence-transformers exports: the vectors as a static sentence encoder.

Both folders hold the vectors in safetensors and a word-level ``tokenizers`` tokenizer over the
vocabulary: text is NFC-normalised, lower-cased when the vectors were distilled lower-cased, and
split into words and punctuation runs; a phrase is one token spelled ``new_york``, as in the
word2vec export. An entry that this split would cut (``don't``, ``u.s.``) is also an added token,
found whole where it stands as a word of its own. Each entry is its tokens' spelling of it, so two
entries spelled alike (``new york`` and ``new_york``, or ``Paris`` and ``paris`` when lower-cased)
are refused (:func:`clashes`). A text's vector is the mean of its words' vectors. Unknown words
map to a zero row: model2vec leaves them out of the mean; sentence-transformers'
``StaticEmbedding`` averages every token, so there an unknown word shortens the vector without
turning it (cosines are the same).

With ``sif_coefficient=a`` each word's vector is scaled by ``a / (a + p(word))``, ``p`` its share of
the folder's counts (Arora et al., 2017, "A simple but tough-to-beat baseline for sentence
embeddings"): frequent words weigh less in a text's mean. Cosines between words do not change.
Counts are the occurrences averaged, so distill with ``--max-contexts 0`` for true frequencies.

Read back (:func:`read`), a folder gives its tokenizer's entries (``[UNK]`` left out, phrases
spelled ``new_york``) with the rows as written (weighted, if they were), and the ``meta.json``
that its model card carries. Neither library stores counts: they read as gensim's stand-ins
(:func:`~roberta_static.vectors.data.rank_counts`). Only safetensors' numpy API and
``tokenizers`` are needed, never torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file
from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel

from ..atomic import follow_umask
from ..errors import VectorsError
from ..vectors.data import VectorData, rank_counts
from ..vectors.sif import check_sif_coefficient, sif_weights
from .clashes import Clash, described, spelled_alike

UNKNOWN = "[UNK]"
PHRASE_JOINER = "_"
# The module type model2vec writes; sentence-transformers releases with StaticEmbedding read it.
STATIC_EMBEDDING = "sentence_transformers.models.StaticEmbedding"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
# The matrix's name in the weights file: model2vec's, then StaticEmbedding's.
MATRIX_NAMES = ("embeddings", "embedding.weight")
PROVENANCE = "## Provenance (`meta.json`)"


def token_table(
    vectors: VectorData, sif_coefficient: float | None = None
) -> tuple[Tokenizer, np.ndarray]:
    """The folder's tokenizer (``[UNK]`` first, then each entry's token) and its float32 rows.

    The unknown token's row is zero.

    Raises:
        VectorsError: Entries the tokenizer cannot hold apart (see :func:`clashes`).

    """
    check_sif_coefficient(sif_coefficient)
    lowercase = vectors.case == "lower"
    keys = spelled(vectors.words, lowercase)
    tokenizer = word_level_tokenizer(keys, lowercase)
    refused = _clashes(vectors.words, keys, tokenizer)
    if refused:
        raise VectorsError(f"a static encoder cannot hold every entry: {described(refused)}")
    matrix = np.asarray(vectors.vectors, dtype=np.float32)
    if sif_coefficient is not None:
        weights = sif_weights(vectors.counts, sif_coefficient)
        matrix = (matrix * weights[:, None]).astype(np.float32)
    return tokenizer, np.vstack([np.zeros((1, vectors.dim), dtype=np.float32), matrix])


def spelled(words: Sequence[str], lowercase: bool) -> list[str]:
    """Each entry as the tokenizer gives it: ``_`` for spaces, NFC, lower-cased if ``lowercase``.

    Example:
        >>> spelled(["New York", "Cafe\u0301"], lowercase=True)
        ['new_york', 'café']

    """
    normalizer = _normalizer(lowercase)
    keys = [PHRASE_JOINER.join(word.split(" ")) for word in words]
    return [
        (key.lower() if lowercase else key) if key.isascii() else normalizer.normalize_str(key)
        for key in keys
    ]


def word_level_tokenizer(keys: Sequence[str], lowercase: bool) -> Tokenizer:
    """A ``tokenizers`` word-level tokenizer: words and punctuation runs, unknown ones ``[UNK]``.

    ``keys`` are the tokens (ids from 1, in order; a repeated one keeps its first id), as
    :func:`spelled` spells them. A key that the split into words and punctuation runs would cut is
    an added token, so that its own spelling gives it whole.
    """
    ids = {UNKNOWN: 0}
    for key in keys:
        ids.setdefault(key, len(ids))
    tokenizer = Tokenizer(WordLevel(ids, unk_token=UNKNOWN))
    tokenizer.normalizer = _normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+|[^\w\s]+ keeps new_york whole
    split = [key for key in ids if key not in ("", UNKNOWN) and _cut(tokenizer, key)]
    # single_word: never inside a longer word, as "n't" would be in "don't".
    tokenizer.add_tokens([AddedToken(key, single_word=True, normalized=True) for key in split])
    return tokenizer


def clashes(words: Sequence[str], fmt: str, case: str) -> list[Clash]:
    """Entries the folder's tokenizer cannot hold apart: spelled alike, or not one token alone.

    Spelled alike (:func:`spelled`): ``new york`` and ``new_york``; ``Paris`` and ``paris`` when
    ``case`` is ``lower``; the NFC and NFD forms of one word. Not one token: an empty entry, or
    ``[UNK]``, the unknown token's own spelling. Both formats of this family hold the same.
    """
    return list(_clashes_of(tuple(words), case == "lower"))


@lru_cache(maxsize=1)  # model2vec and sentence-transformers, asked one after the other
def _clashes_of(words: tuple[str, ...], lowercase: bool) -> tuple[Clash, ...]:
    keys = spelled(words, lowercase)
    return tuple(_clashes(words, keys, word_level_tokenizer(keys, lowercase)))


def _clashes(words: Sequence[str], keys: list[str], tokenizer: Tokenizer) -> list[Clash]:
    unknown = "would be the unknown token"
    clashes = [
        Clash((word,), "is empty" if not key else unknown)
        for word, key in zip(words, keys, strict=True)
        if key in ("", UNKNOWN)
    ]
    # The added tokens are checked by the tokenizer itself. Any other key is one run of word
    # characters or of punctuation, and an added token never is: none can match inside it. Such a
    # key is found whole if normalising it again leaves it as it is.
    added = [token.content for token in tokenizer.get_added_tokens_decoder().values()]
    ids = tokenizer.get_vocab()
    encoded = tokenizer.encode_batch(added, add_special_tokens=False) if added else []
    lost = {key for key, got in zip(added, encoded, strict=True) if got.ids != [ids[key]]}
    normalizer = tokenizer.normalizer
    lost.update(key for key in keys if not key.isascii() and normalizer.normalize_str(key) != key)
    clashes += [
        Clash((word,), "is not one token when its spelling is encoded")
        for word, key in zip(words, keys, strict=True)
        if key in lost
    ]
    return clashes + spelled_alike(words, keys)


_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")


def _cut(tokenizer: Tokenizer, key: str) -> bool:
    """Whether the split into words and punctuation runs cuts ``key`` (or drops part of it)."""
    if _ASCII_WORD.fullmatch(key):  # a word to every definition of \w: no need to ask
        return False
    return [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(key)] != [key]


def _normalizer(lowercase: bool) -> normalizers.Normalizer:
    steps = [normalizers.NFC(), normalizers.Lowercase()] if lowercase else [normalizers.NFC()]
    return normalizers.Sequence(steps)


def detect(path: Path) -> str | None:
    """``sentence-transformers`` or ``model2vec`` for a folder of either, by its config file."""
    if (path / "config_sentence_transformers.json").is_file():
        return "sentence-transformers"
    config = _read_json(path / "config.json")
    if isinstance(config, dict) and config.get("model_type") == "model2vec":
        return "model2vec"
    return None


def write(
    vectors: VectorData, path: Path, fmt: str, sif_coefficient: float | None = None
) -> list[Path]:
    """Write the ``fmt`` folder at ``path``."""
    writer = write_model2vec if fmt == "model2vec" else write_sentence_transformers
    writer(vectors, path, sif_coefficient)
    return [path]


def read(path: Path, fmt: str, mmap: bool = False, allow_pickle: bool = False) -> VectorData:
    """Read a ``fmt`` folder (``mmap`` and ``allow_pickle`` are unused: safetensors is no pickle).

    A sentence-transformers folder is read from its ``StaticEmbedding`` module, wherever
    ``modules.json`` puts it.

    Raises:
        VectorsError: The folder lacks a static embedding, or its files disagree.

    """
    folder = path if fmt == "model2vec" else _static_module(path)
    matrix = _matrix(folder / WEIGHTS)
    try:
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER))
    except Exception as error:  # tokenizers raises a bare Exception for a bad file
        raise VectorsError(f"{folder / TOKENIZER}: cannot read the tokenizer ({error})") from None
    ids = tokenizer.get_vocab(with_added_tokens=True)
    if len(ids) != len(matrix):
        raise VectorsError(f"{folder}: {len(ids):,} tokens but {len(matrix):,} rows in {WEIGHTS}")
    unknown = getattr(tokenizer.model, "unk_token", None)
    words = sorted((token for token in ids if token != unknown), key=ids.__getitem__)
    return VectorData(
        words,
        matrix[[ids[word] for word in words]],
        rank_counts(len(words)),
        provenance(path / "README.md"),
    )


def provenance(card: Path) -> dict[str, Any]:
    """The ``meta.json`` that a model card written by :func:`model_card` ends with, else ``{}``."""
    try:
        text = card.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    block = text.partition(f"{PROVENANCE}\n\n```json\n")[2].partition("\n```\n")[0]
    try:
        meta = json.loads(block)
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def write_model2vec(
    vectors: VectorData, folder: Path, sif_coefficient: float | None = None
) -> None:
    """Write a folder as ``model2vec``'s ``save_pretrained`` does: ``StaticModel`` loads it.

    Example:
        >>> write_model2vec(vecs, Path("out/model2vec"))  # doctest: +SKIP
        >>> StaticModel.from_pretrained("out/model2vec").encode(["a cat"])  # doctest: +SKIP

    """
    tokenizer, matrix = token_table(vectors, sif_coefficient)
    folder.mkdir()
    _write_weights({"embeddings": matrix}, folder)
    tokenizer.save(str(folder / TOKENIZER))
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "hidden_dim": vectors.dim,
        "normalize": False,
        "max_length": None,  # static vectors have no input limit
        "sif_coefficient": sif_coefficient,
        "apply_pca": vectors.meta.get("config", {}).get("pca"),
        "embedding_dtype": "float32",
    }
    _write_json(folder / "config.json", config)
    _write_json(folder / "modules.json", [_module(".")])
    (folder / "README.md").write_text(
        model_card(vectors, "model2vec", sif_coefficient), encoding="utf-8"
    )


def write_sentence_transformers(
    vectors: VectorData, folder: Path, sif_coefficient: float | None = None
) -> None:
    """Write a ``SentenceTransformer`` folder of one ``StaticEmbedding`` module, as it saves one.

    Example:
        >>> write_sentence_transformers(vecs, Path("out/st"))  # doctest: +SKIP
        >>> SentenceTransformer("out/st").encode(["a cat"])  # doctest: +SKIP

    """
    tokenizer, matrix = token_table(vectors, sif_coefficient)
    folder.mkdir()
    _write_weights({"embedding.weight": matrix}, folder)
    tokenizer.save(str(folder / TOKENIZER))
    _write_json(folder / "modules.json", [_module("")])
    _write_json(
        folder / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    (folder / "README.md").write_text(
        model_card(vectors, "sentence-transformers", sif_coefficient), encoding="utf-8"
    )


_LOADING = {
    "model2vec": ("from model2vec import StaticModel\n\nmodel = StaticModel.from_pretrained(PATH)"),
    "sentence-transformers": (
        "from sentence_transformers import SentenceTransformer\n\nmodel = SentenceTransformer(PATH)"
    ),
}


def model_card(vectors: VectorData, library: str, sif_coefficient: float | None) -> str:
    """README.md: front matter for the hub, how to load, and the provenance from ``meta.json``."""
    meta = vectors.meta
    model = meta.get("model", {})
    config = meta.get("config", {})
    base = model.get("name") or config.get("model") or "unknown"
    fingerprint = model.get("revision") or model.get("sha256") or "not recorded"
    corpus = ", ".join(f"{c['path']} ({c['bytes']:,} bytes)" for c in meta.get("corpus", []))
    weighting = f"SIF, a = {sif_coefficient}" if sif_coefficient is not None else "none"
    made = "the mean of each entry's contextual vectors over a corpus"
    if "tune" in meta:  # the rows hold each tuned vector times its learned weight, plus the offset
        weighting = "learned by `roberta-static tune`, in the rows (weight x vector + offset)"
        made += ", then tuned so that a text's mean predicts the model's sentence vector"
    front = {
        "library_name": library,
        "base_model": base,
        "tags": ["static-embeddings", "roberta-static", library],
    }
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in front.items()), "---", ""]
    lines += [
        f"# Static embeddings distilled from {base}",
        "",
        f"{len(vectors):,} words and phrases, {vectors.dim} dimensions, distilled by "
        f"roberta-static ({made}). A text's embedding is the mean of its words' vectors; "
        "phrases are tokens spelled `new_york`.",
        "",
        "```python",
        _LOADING[library].replace("PATH", json.dumps("path/to/this/folder")),
        'model.encode(["The cat sat on the mat."])',
        "```",
        "",
        "| | |",
        "| --- | --- |",
        f"| model | `{base}` ({fingerprint}) |",
        f"| layers, combine, pool | {config.get('layers')}, {config.get('combine')}, "
        f"{config.get('pool')} |",
        f"| case | {vectors.case} |",
        f"| corpus | {corpus or 'not recorded'} |",
        f"| post-processing | {meta.get('postprocessing') or 'none'} |",
        f"| weighting | {weighting} |",
        "",
        PROVENANCE,
        "",
        "```json",
        json.dumps(meta, indent=2, ensure_ascii=False),
        "```",
        "",
    ]
    return "\n".join(lines)


def _static_module(folder: Path) -> Path:
    """The folder of a sentence-transformers model's ``StaticEmbedding`` module."""
    modules = _read_json(folder / "modules.json")
    paths = [
        module.get("path", "")
        for module in (modules if isinstance(modules, list) else [])
        if isinstance(module, dict) and str(module.get("type", "")).endswith("StaticEmbedding")
    ]
    if not paths:
        raise VectorsError(
            f"{folder}: a sentence-transformers model without a StaticEmbedding module in "
            "modules.json; only static ones can be read"
        )
    module = folder / str(paths[0])
    # A model folder comes from anywhere: its modules.json may name no file outside it.
    if not module.resolve().is_relative_to(folder.resolve()):
        raise VectorsError(
            f"{folder}: modules.json puts the StaticEmbedding module at {paths[0]!r}, outside "
            "the model folder; only modules inside it are read"
        )
    return module


def _matrix(path: Path) -> np.ndarray:
    """The embedding matrix in a safetensors file, by model2vec's or StaticEmbedding's name."""
    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as error:
        raise VectorsError(f"{path}: cannot read the weights ({error})") from None
    matrix = next((tensors[name] for name in MATRIX_NAMES if name in tensors), None)
    if matrix is None or matrix.ndim != 2:
        raise VectorsError(f"{path}: holds no 2-D {' or '.join(MATRIX_NAMES)} tensor")
    return matrix


def _read_json(path: Path) -> Any:
    """A JSON file's value, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _module(path: str) -> dict[str, object]:
    return {"idx": 0, "name": "0", "path": path, "type": STATIC_EMBEDDING}


def _write_weights(tensors: dict[str, np.ndarray], folder: Path) -> None:
    path = folder / WEIGHTS
    save_file(tensors, str(path))
    follow_umask(path)  # readable by whoever may read the folder's other files


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
