"""Fine-tuning benchmark: masked-LM training on the gensim text, then distill base vs fine-tuned.

Corpus: the Wikipedia excerpt and ``lee_background.cor`` shipped with gensim (as quality.py).
Model: the offline all-MiniLM-L6-v2, which ships no masked-LM head, so ``--init-mlm-head``.
Prints held-out perplexity before/after, training tokens/s, and SimLex-999 / WordSim-353 (Spearman
x 100, coverage) of vectors distilled with the same options from the base and fine-tuned models.

Usage: python benchmarks/finetune.py [--max-steps N] [--max-length N] [--batch-size N]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from gensim_corpus import lee_documents, wiki_paragraphs
from quality import DATASETS, dataset_words, minilm_path

from roberta_static import DistillConfig
from roberta_static.api import distill_from_model
from roberta_static.finetune.config import FinetuneConfig
from roberta_static.finetune.run import FINETUNE_FILE, finetune
from roberta_static.model.loading import load_pretrained
from roberta_static.quality.evaluate import dataset_path, evaluate_pairs
from roberta_static.text.corpus import Corpus
from roberta_static.text.vocab import Vocabulary


def scores(model: str, corpus: Path) -> tuple[list[str], float]:
    """Distill the dataset words from ``model`` with the default options; one score per dataset."""
    config = DistillConfig(model=model, device="cpu")
    encoder, tokenizer = load_pretrained(config)
    tick = time.perf_counter()
    vocab = Vocabulary.from_entries(dataset_words())
    vectors = distill_from_model(encoder, tokenizer, Corpus([corpus]), vocab, config)
    seconds = time.perf_counter() - tick
    kv = vectors.to_keyed_vectors()
    found = []
    for name in DATASETS:
        s = evaluate_pairs(kv, dataset_path(name)[1], True, name)
        found.append(f"{name} {s.spearman:.1f} ({s.coverage:.0f} % of pairs)")
    return found, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    args = parser.parse_args()
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the new head's load report is expected
    hf_logging.disable_progress_bar()
    started = time.perf_counter()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join([*wiki_paragraphs(), *lee_documents()]) + "\n")
        config = FinetuneConfig(
            model=minilm_path(),
            init_mlm_head=True,
            max_steps=args.max_steps,
            max_length=args.max_length,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            device="cpu",
        )
        out = finetune(corpus, Path(tmp) / "minilm-domain", config)
        record = json.loads((out / FINETUNE_FILE).read_text())
        held_out = record["held_out"]
        print(
            f"finetune: {record['steps']} steps x {args.batch_size} blocks of <= "
            f"{args.max_length} tokens, lr {args.learning_rate}, new MLM head "
            f"(tied: {record['mlm_head']['tied_to_input_embeddings']})"
        )
        print(
            f"held-out perplexity ({held_out['fraction']:.0%} of sentences): "
            f"{held_out['perplexity_before']:,.1f} -> {held_out['perplexity_after']:,.1f}"
        )
        print(
            f"training: {record['tokens_seen']:,} tokens in {record['seconds']:.0f} s "
            f"({record['tokens_seen'] / record['seconds']:,.0f} tokens/s, padding included)"
        )
        for label, model in (("base MiniLM", minilm_path()), ("fine-tuned", str(out))):
            found, seconds = scores(model, corpus)
            print(f"distilled from {label:12}: {'; '.join(found)} (distill {seconds:.0f} s)")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
