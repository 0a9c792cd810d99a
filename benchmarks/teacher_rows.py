"""The rows of vectors learned from the teacher's sentences: ours tuned, and model2vec + tokenlearn.

Shared by ``sentiment.py`` and ``doc_similarity.py``; both train on the text their other rows see.

- Ours tuned: ``distill`` over the text keeping sentence targets (MiniLM's own sentence vectors:
  mean pooling, normalised), then ``tune`` with its defaults.
- model2vec + tokenlearn: tokenlearn 0.2.1 (the PyPI release) as its README runs it, with MiniLM
  as teacher: ``featurize`` (the mean of MiniLM's token vectors, special tokens left out), then
  ``train_model`` (model2vec distillation over a vocabulary of the text's words, PCA 256, MSE,
  early stopping). tokenlearn needs transformers < 5.4 (through model2vec's ``distill`` extra),
  so it runs in a Python of its own (``--tokenlearn-python``: a venv with
  ``pip install -c constraints.txt tokenlearn``), through ``tokenlearn_train.py``; the texts it
  trains on are the sentences our segmenter finds, ours' passages.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.text.segment import load_segmenter, segment
from roberta_static.tuning.config import TuneConfig
from roberta_static.tuning.run import tune

TARGETS = 200_000  # sentence targets kept: the default
TOKENLEARN_SCRIPT = Path(__file__).with_name("tokenlearn_train.py")


def with_targets(texts: list[str], model: str, work: Path, key: str) -> Path:
    """The folder of vectors distilled over ``texts`` keeping sentence targets (cached)."""
    distilled = work / f"targets-{key}"
    if not (distilled / "meta.json").is_file():
        config = DistillConfig(
            model=model, min_count=1, max_contexts=0, device="cpu", sentence_targets=TARGETS
        )
        tick = time.perf_counter()
        distill(texts=texts, config=config).save(distilled)  # targets/ with the vectors
        print(f"  distill keeping targets: {time.perf_counter() - tick:.0f} s")
    return distilled


def tuned_vectors(texts: list[str], model: str, work: Path, key: str) -> StaticVectors:
    """Vectors distilled over ``texts`` keeping targets, then tuned (both cached under ``work``)."""
    config = TuneConfig(device="cpu")
    options = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()
    distilled, tuned = with_targets(texts, model, work, key), work / f"tuned-{key}-{options[:8]}"
    if not (tuned / "meta.json").is_file():
        record = tune(distilled, tuned, config).meta["tune"]
        loss = record["held_out_loss"]
        print(
            f"  tune: {record['targets']['sentences']:,} sentences, held-out loss "
            f"{loss['start']:.4g} -> {loss['best']:.4g}, {record['epochs']} epochs, "
            f"{record['seconds']:.0f} s"
        )
    return StaticVectors.load(tuned)


def sentences(texts: list[str]) -> list[str]:
    """The sentences our segmenter finds in ``texts`` (the blank English pipeline's)."""
    nlp = load_segmenter("en")
    return [
        sentence.text.strip()
        for doc, _ in segment(nlp, ((text, None) for text in texts))
        for sentence in doc.sents
        if sentence.text.strip()
    ]


def tokenlearn_model(
    texts: list[str], model: str, work: Path, key: str, python: Path | None
) -> Path | None:
    """A model2vec folder trained by tokenlearn on ``texts``' sentences (cached under ``work``).

    None, with a line saying why, without a tokenlearn Python.
    """
    if python is None:
        print("model2vec + tokenlearn: skipped (no --tokenlearn-python)")
        return None
    out = work / f"tokenlearn-{key}"
    if not (out / "config.json").is_file():
        corpus = work / f"tokenlearn-{key}.txt"
        corpus.write_text("\n".join(sentences(texts)) + "\n", encoding="utf-8")
        tick = time.perf_counter()
        command = [str(python), str(TOKENLEARN_SCRIPT), "--texts", str(corpus), "--model", model]
        subprocess.run(
            [*command, "--out", str(out), "--work", str(work / f"features-{key}")], check=True
        )
        print(f"  model2vec + tokenlearn: {time.perf_counter() - tick:.0f} s")
    return out
