"""Train a model2vec model with tokenlearn 0.2.1 as its README does, on texts in a file.

Run by ``teacher_rows.py`` in a Python where tokenlearn is installed (it needs transformers < 5.4):
``featurize`` the texts with the teacher (tokenlearn's targets: the mean of its token vectors,
first and last token left out), then its ``train.main`` steps: a vocabulary of the texts' words
(``create_vocab``), model2vec ``distill`` of the teacher over it with PCA to ``--pca-dims``, and
``train_model`` (targets reduced by PCA, MSE, AdamW 1e-3, batch 256, early stopping on a held-out
tenth). Only the command line is ours; every step is tokenlearn's or model2vec's own function.

Usage: python tokenlearn_train.py --texts FILE --model PATH --out DIR --work DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from model2vec.distill import distill
from sentence_transformers import SentenceTransformer
from tokenlearn.featurize import featurize
from tokenlearn.train import train_model
from tokenlearn.utils import collect_means_and_texts, create_vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=Path, required=True, help="one text per line")
    parser.add_argument(
        "--model", required=True, help="the teacher: a sentence-transformers folder"
    )
    parser.add_argument("--out", type=Path, required=True, help="the model2vec folder to write")
    parser.add_argument("--work", type=Path, required=True, help="where the features go")
    parser.add_argument("--pca-dims", type=int, default=256, help="tokenlearn's default")
    parser.add_argument("--vocab-size", type=int, default=56_000, help="tokenlearn's default")
    args = parser.parse_args()
    texts = [line for line in args.texts.read_text(encoding="utf-8").splitlines() if line]
    teacher = SentenceTransformer(args.model, device="cpu")
    rows = ({"text": text} for text in texts)
    featurize(rows, teacher, str(args.work), len(texts), batch_size=32, text_key="text")
    train_texts, train_vectors = collect_means_and_texts(sorted(args.work.glob("*.json")))
    vocabulary = create_vocab(texts=train_texts, vocab_size=args.vocab_size)
    model = distill(
        model_name=args.model, vocabulary=vocabulary, pca_dims=args.pca_dims, quantize_to="float32"
    )
    trained = train_model(model, train_texts, train_vectors, device="cpu", pca_dims=args.pca_dims)
    trained.save_pretrained(str(args.out))


if __name__ == "__main__":
    main()
