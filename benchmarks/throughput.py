"""Throughput benchmark: our engine against the original algorithm and against the encoder alone.

(a) ``distill`` end to end (segmentation, matching, tokenization, encoder, pooling);
(b) the original algorithm, re-implemented from its documentation: sentences split on line breaks
    and periods; for each vocabulary word, the sentences holding it as a whole word (lower-cased),
    up to 2,000, those over 512 tokens discarded; one forward pass per (word, sentence), batch size
    1, float32; the chosen layers summed; timed on a random sample of the vocabulary, per word;
(c) the encoder alone on exactly the batches (a) built, already tokenized: the ceiling for (a).

Input: gensim's Wikipedia excerpt + lee_background.cor (2.6 MB), the SimLex-999 + WordSim-353
vocabulary, the offline all-MiniLM-L6-v2 on CPU (or ``--model``). ``--scaling`` adds runs on the
corpus repeated x1, x2, x4, each in a fresh process, for time and peak memory. ``--tolerance``
runs (a) twice and prints the cosine between the two runs' vectors (a GPU's run-to-run tolerance).

Torch and the library are imported where they are used: ``distill``'s worker processes are
spawned, and a spawned process imports the main script first; at the top, they would cost each
worker a second of start-up that ``distill`` run from the command line does not have.

Usage: python benchmarks/throughput.py [--model PATH | --random-roberta-base] [--dtype D]
       [--workers auto] [--corpus FILE] [--vocab FILE] [--copies 1]
       [--baseline-words 30] [--peak-tflops T] [--tolerance] [--scaling | --scaling-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from roberta_static.errors import RobertaStaticError

if TYPE_CHECKING:
    from roberta_static import DistillConfig, StaticVectors
    from roberta_static.text.vocab import Vocabulary


def positive(kind: type) -> Any:
    """An argparse type: a number of ``kind`` above zero."""

    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def check_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with argparse's one-line error when ``--corpus`` or ``--vocab`` has nothing to give."""
    inputs = ((args.corpus, corpus_lines, "text"), (args.vocab, vocabulary_words, "words"))
    for path, read, what in inputs:
        if path and not Path(path).is_file():
            parser.error(f"{path}: no such file")
        if path and not read(path):
            parser.error(f"{path}: no {what} in it")


def one_line_errors(main: Callable[[], None]) -> None:
    """Run a benchmark's ``main``: the library's errors (a bad option or model) end it in one line."""
    try:
        main()
    except RobertaStaticError as error:
        sys.exit(f"{Path(sys.argv[0]).name}: error: {error}")


def peak_rss_mb() -> float:
    """This process's peak RSS. Linux's VmHWM starts afresh at exec; ru_maxrss keeps the peak of
    the parent that forked it, which would hide a scaling child's own peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_random_roberta_base(folder: Path, lines: list[str]) -> str:
    """``RobertaConfig()`` defaults with random weights (roberta-base's arithmetic) and a
    byte-level BPE tokenizer trained on the corpus, saved the way a downloaded model is."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        lines, vocab_size=50_265, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizerFast(
        str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=512
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    RobertaModel(config).eval().save_pretrained(folder)
    return str(folder)


def flops_per_token(model, tokens: int, padded_tokens: int, batches: list) -> float:
    """Model FLOPs per real token: 2 x non-embedding parameters, plus attention's two matmuls
    (4 x layers x hidden x sequence length per padded token)."""
    embedding = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
    dense = 2 * (sum(p.numel() for p in model.parameters()) - embedding) * padded_tokens
    layers, hidden = model.config.num_hidden_layers, model.config.hidden_size
    attention = sum(4 * layers * hidden * b.input_ids.shape[1] * b.input_ids.size for b in batches)
    return (dense + attention) / tokens


def hardware() -> str:
    import torch

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads){gpu}"


def run_ours(model, tokenizer, corpus_file: Path, vocab: Vocabulary, config: DistillConfig):
    """(a), recording every batch the encoder sees for (c)."""
    import torch

    from roberta_static.api import distill_from_model
    from roberta_static.model.encoder import Encoder
    from roberta_static.text.corpus import Corpus

    batches = []
    encode = Encoder.encode

    def recording(self, batch):
        batches.append(batch)
        return encode(self, batch)

    Encoder.encode = recording
    try:
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        vectors = distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)
        seconds = time.perf_counter() - start
    finally:
        Encoder.encode = encode
    return vectors, seconds, batches


def run_encoder_alone(model, tokenizer, config: DistillConfig, batches) -> float:
    """(c): the same batches, their inputs moved to the device beforehand."""
    import torch

    from roberta_static.model.encoder import Encoder

    encoder = Encoder(model, tokenizer, config)
    with torch.inference_mode():
        ready = [encoder.move(batch)[:2] for batch in batches]
        start = time.perf_counter()
        for ids, mask in ready:
            encoder.forward(ids, mask)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return time.perf_counter() - start


def original_sentences(lines: list[str]) -> list[str]:
    """The original tool's units: the text split on line breaks and on periods."""
    return [part.strip() for line in lines for part in line.split(".") if part.strip()]


def run_original(
    model_path: str, lines: list[str], words: list[str], layers: tuple[int, ...]
) -> tuple[float, int, int]:
    """(b): the original algorithm as its documentation describes it.

    For each word: every sentence holding it as a whole word (lower-cased match), up to 2,000
    sentences; a sentence over 512 tokens is discarded, not truncated; one forward pass per
    (word, sentence), batch size 1, float32; the word's subwords averaged over the chosen layers
    summed; the sentence vectors averaged. Returns seconds, forward passes, discarded sentences.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).float().eval().to(device)
    sentences = original_sentences(lines)
    lowered = [sentence.lower() for sentence in sentences]
    passes = discarded = 0
    start = time.perf_counter()
    for word in words:
        vectors = []
        for sentence, match in sentences_with(word, sentences, lowered):
            encoding = tokenizer(sentence, return_offsets_mapping=True, return_tensors="pt")
            if encoding["input_ids"].shape[1] > 512:
                discarded += 1
                continue
            vector = word_vector(model, encoding, match, layers, device)
            passes += 1
            if vector is not None:
                vectors.append(vector)
            if len(vectors) >= 2000:
                break
        if vectors:
            torch.stack(vectors).mean(0)
    return time.perf_counter() - start, passes, discarded


def sentences_with(word: str, sentences: list[str], lowered: list[str]):
    """Each sentence holding ``word`` as a whole word (lower-cased match), with the match."""
    pattern = re.compile(rf"(?<!\w){re.escape(word.lower())}(?!\w)")
    for sentence, low in zip(sentences, lowered, strict=True):
        match = pattern.search(low)
        if match is not None:
            yield sentence, match


def word_vector(model, encoding, match, layers: tuple[int, ...], device: str):
    """One forward pass: the matched word's subwords averaged over the chosen layers summed."""
    import torch

    offsets = encoding.pop("offset_mapping")[0].to(device)
    with torch.no_grad():
        states = model(**encoding.to(device), output_hidden_states=True).hidden_states
    summed = torch.stack([states[layer][0] for layer in layers]).sum(0)
    inside = (offsets[:, 0] < match.end()) & (offsets[:, 1] > match.start())
    return summed[inside].mean(0) if inside.any() else None


def corpus_lines(corpus: str | None) -> list[str]:
    """The lines of ``--corpus``, or gensim's Wikipedia excerpt and Lee documents."""
    if corpus:
        return [line for line in Path(corpus).read_text().splitlines() if line.strip()]
    from gensim_corpus import lee_documents, wiki_paragraphs

    return [*wiki_paragraphs(), *lee_documents()]


def vocabulary_words(vocab: str | None) -> list[str]:
    """The words of ``--vocab``, or those of SimLex-999 and WordSim-353."""
    if vocab:
        return [line.strip() for line in Path(vocab).read_text().splitlines() if line.strip()]
    from quality import dataset_words

    return dataset_words()


def default_model() -> str:
    from quality import minilm_path

    return minilm_path()


def write_corpus(
    path: Path, repeat: int = 1, lines: int | None = None, corpus: str | None = None
) -> list[str]:
    text = corpus_lines(corpus)
    if lines:
        text = text[:lines]
    path.write_text("\n".join(text * repeat) + "\n")
    return text


def scaling_child(model: str, repeat: int, lines: int) -> None:
    from roberta_static import DistillConfig
    from roberta_static.api import distill_from_model
    from roberta_static.model.loading import load_pretrained
    from roberta_static.text.corpus import Corpus
    from roberta_static.text.vocab import Vocabulary

    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        write_corpus(corpus_file, repeat, lines)
        config = DistillConfig(model=model)
        model_obj, tokenizer = load_pretrained(config)
        rss_before = peak_rss_mb()
        start = time.perf_counter()
        vectors = distill_from_model(
            model_obj,
            tokenizer,
            Corpus([corpus_file]),
            Vocabulary.from_entries(vocabulary_words(None)),
            config,
        )
        print(
            json.dumps(
                {
                    "repeat": repeat,
                    "bytes": corpus_file.stat().st_size,
                    "seconds": time.perf_counter() - start,
                    "tokens": vectors.meta["stats"]["tokens"],
                    "peak_rss_mb": peak_rss_mb(),
                    "rss_after_load_mb": rss_before,
                }
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--baseline-words", type=positive(int), default=30)
    parser.add_argument("--scaling", action="store_true", help="add the scaling runs")
    parser.add_argument("--scaling-only", action="store_true", help="only the scaling runs")
    parser.add_argument(
        "--scaling-lines",
        type=positive(int),
        default=1000,
        help="corpus lines per x1 of the scaling run",
    )
    parser.add_argument(
        "--random-roberta-base",
        action="store_true",
        help="instead of --model: RobertaConfig() with random weights, BPE trained on the corpus",
    )
    parser.add_argument(
        "--peak-tflops", type=positive(float), help="the device's peak, for model FLOP use"
    )
    parser.add_argument("--corpus", help="a text file instead of gensim's Wikipedia + Lee text")
    parser.add_argument("--vocab", help="a word list instead of SimLex-999 + WordSim-353's words")
    parser.add_argument(
        "--workers", default="auto", help="(a)'s worker processes: a number or auto, as distill's"
    )
    parser.add_argument("--copies", type=positive(int), default=1, help="the text this many times")
    parser.add_argument(
        "--tolerance", action="store_true", help="run (a) twice; print the cosine between runs"
    )
    parser.add_argument("--scaling-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    check_files(parser, args)
    model_path = args.model or (None if args.random_roberta_base else default_model())
    if args.scaling_child:
        scaling_child(model_path, args.scaling_child, args.scaling_lines)
        return
    print(f"hardware: {hardware()}")
    if not args.scaling_only:
        compare(model_path, args)
    if args.scaling or args.scaling_only:
        scaling(model_path, args.scaling_lines)


def compare(model_path: str | None, args: argparse.Namespace) -> None:
    """(a), (b) and (c) on the same input; without ``model_path``, a random roberta-base."""
    import torch

    from roberta_static import DistillConfig
    from roberta_static.model.encoder import Encoder
    from roberta_static.model.loading import load_pretrained
    from roberta_static.text.vocab import Vocabulary

    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        lines = write_corpus(corpus_file, args.copies, corpus=args.corpus)
        label = model_path or "random-weight roberta-base, byte-level BPE trained on the text"
        if model_path is None:
            model_path = build_random_roberta_base(Path(tmp) / "roberta-base-random", lines)
        words = vocabulary_words(args.vocab)
        vocab = Vocabulary.from_entries(words)
        config = DistillConfig(model=model_path, dtype=args.dtype, workers=args.workers)
        model, tokenizer = load_pretrained(config)
        vectors, ours_seconds, batches = run_ours(model, tokenizer, corpus_file, vocab, config)
        rss = peak_rss_mb()
        device_mb = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0
        if args.tolerance:
            again, again_seconds, _ = run_ours(model, tokenizer, corpus_file, vocab, config)
        encoder_seconds = run_encoder_alone(model, tokenizer, config, batches)
        stats = vectors.meta["stats"]
        sample = random.Random(0).sample(words, min(args.baseline_words, len(words)))
        layers = Encoder(model, tokenizer, config).layers
        text = lines * args.copies
        original_seconds, passes, discarded = run_original(model_path, text, sample, layers)
        per_token = flops_per_token(model, stats["tokens"], stats["padded_tokens"], batches)

    ours_wps = len(words) / ours_seconds
    original_wps = len(sample) / original_seconds
    print(
        f"model: {label}; layers {config.layers}, dtype {vectors.meta['model']['dtype']}, device {vectors.meta['model']['device']}"
    )
    print(
        f"corpus: the text x{args.copies}, {sum(len(line) + 1 for line in text):,} characters, {stats['sentences']:,} sentences; vocabulary {len(words):,} words; "
        f"workers {vectors.meta['config']['workers']}"
    )
    print(
        f"(a) ours:          {ours_seconds:8.1f} s  {ours_wps:8.2f} vocabulary words/s  {stats['tokens'] / ours_seconds:9,.0f} model tokens/s"
    )
    print(
        f"(b) original:      {original_seconds:8.1f} s for {len(sample)} sampled words ({passes:,} forward passes, {discarded:,} sentences over 512 tokens discarded)  {original_wps:8.3f} vocabulary words/s"
    )
    print(
        f"(c) encoder alone: {encoder_seconds:8.1f} s  {stats['tokens'] / encoder_seconds:9,.0f} model tokens/s on the same {len(batches):,} batches"
    )
    print(
        f"{versus_original(ours_wps, original_wps, passes)};  "
        f"(a)/(c) = {encoder_seconds / ours_seconds:.2f}"
    )
    print(
        f"padding: {1 - stats['tokens'] / stats['padded_tokens']:.1%} of encoder tokens; sentences skipped (no entry left): "
        f"{stats['sentences_without_entries'] / stats['sentences']:.1%}; stopped early: {stats['stopped_early']}"
    )
    print(f"peak RSS {rss:,.0f} MB; peak device memory {device_mb:,.0f} MB")
    achieved = per_token * stats["tokens"] / ours_seconds / 1e12
    use = (
        f", {achieved / args.peak_tflops:.1%} of the {args.peak_tflops:g} TFLOP/s peak"
        if args.peak_tflops
        else ""
    )
    print(
        f"model FLOPs: {per_token / 1e6:,.1f} M per token; {achieved:.3f} TFLOP/s end to end{use}"
    )
    if args.tolerance:
        print(run_to_run(vectors, again, stats["tokens"] / again_seconds))


def versus_original(ours_wps: float, original_wps: float, passes: int) -> str:
    """(a)/(b) in vocabulary words/s; not a ratio when (b)'s sampled words met no sentence."""
    if not passes:
        return "(a)/(b): not measured, none of the sampled words occurs in the text"
    return f"(a)/(b) = {ours_wps / original_wps:.1f}x in vocabulary words/s"


def word_cosines(first: StaticVectors, second: StaticVectors) -> np.ndarray:
    """The cosine between each entry's two vectors, in float64; entries without one left out."""
    if first.words != second.words:
        raise ValueError("the two runs hold different entries")
    a, b = first.vectors.astype(np.float64), second.vectors.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    found = norms > 0
    return (a * b).sum(axis=1)[found] / norms[found]


def run_to_run(first: StaticVectors, second: StaticVectors, rate: float) -> str:
    """How far two runs of (a) on the same input lie apart: the device's run-to-run tolerance."""
    cosine = word_cosines(first, second)
    largest = np.abs(first.vectors.astype(np.float64) - second.vectors).max()
    return (
        f"run to run (a second (a), {rate:,.0f} model tokens/s): cosine per word mean "
        f"{cosine.mean():.7f}, min {cosine.min():.7f} over {len(cosine):,} words; largest "
        f"coordinate difference {largest:.2e}"
    )


def scaling(model_path: str, lines: int) -> None:
    """The corpus repeated x1, x2, x4, each in a fresh process: time and peak memory."""
    for repeat in (1, 2, 4):
        result = subprocess.run(
            [
                sys.executable,
                __file__,
                "--model",
                model_path,
                "--scaling-child",
                str(repeat),
                "--scaling-lines",
                str(lines),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"scaling x{repeat}: {row['bytes']:,} bytes, {row['tokens']:,} tokens, {row['seconds']:.1f} s "
            f"({row['tokens'] / row['seconds']:,.0f} tokens/s), peak RSS {row['peak_rss_mb']:,.0f} MB "
            f"(after model load {row['rss_after_load_mb']:,.0f} MB)"
        )


if __name__ == "__main__":
    np.seterr(all="ignore")
    one_line_errors(main)
