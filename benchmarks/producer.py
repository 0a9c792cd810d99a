"""The CPU side alone: model tokens/s that 1 and N worker processes prepare, the encoder removed.

Each worker runs distill's producer (read, segment with spaCy, match the vocabulary, take contexts,
tokenize into subwords, batch) over shards of the corpus and counts the model tokens of the batches
it made; nothing is sent back but the count, so this is the ceiling of what N workers can hand to
encoders. ``--max-contexts 0`` (every occurrence) by default, so each shard does the same work it
would in a parallel run; the single-process figure is also given with ``--max-contexts 2000`` (the
default) for comparison with the serial pass.

Input: gensim's Wikipedia excerpt + lee_background.cor, repeated ``--repeat`` times, the SimLex-999 +
WordSim-353 vocabulary, the tokenizer of the offline all-MiniLM-L6-v2.

Usage: python benchmarks/producer.py [--workers 1,2] [--repeat 2] [--profile]
       [--corpus FILE] [--vocab FILE] [--model FOLDER]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import multiprocessing
import os
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

# What distill sets in its worker processes (workers.py): one core each.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from throughput import corpus_lines, default_model, vocabulary_words  # noqa: E402

from roberta_static import DistillConfig
from roberta_static.engine.messages import EncodeShard
from roberta_static.engine.producer import Producer
from roberta_static.engine.schedule import whole_corpus
from roberta_static.engine.state import ShardState
from roberta_static.model.batches import make_batches
from roberta_static.text.corpus import Corpus
from roberta_static.text.segment import Segmenter, load_segmenter
from roberta_static.text.shards import Shard, plan_shards
from roberta_static.text.vocab import VocabMatcher, Vocabulary

_producer: Producer | None = None
_entries = 0


def build_producer(files: list[str], words: list[str], model: str, max_contexts: int) -> Producer:
    from transformers import AutoTokenizer

    from roberta_static.model.subwords import SubwordEncoder

    config = DistillConfig(model=model, max_contexts=max_contexts)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    subwords = SubwordEncoder(tokenizer.backend_tokenizer, 512, tokenizer.pad_token_id)
    nlp = load_segmenter(config.lang, config.spacy_model)
    matcher = VocabMatcher.of(nlp, Vocabulary.from_entries(words))
    segmenter = Segmenter(config.lang, config.spacy_model, nlp)
    return Producer(segmenter, matcher, subwords, 8192, Corpus(files), config)


def _init(files: list[str], words: list[str], model: str, loaded: Any) -> None:
    global _producer, _entries
    _producer, _entries = build_producer(files, words, model, 0), len(words)
    gc.freeze()  # as distill's workers do once their producer is built (engine/worker.py)
    loaded.wait()  # the clock starts once every worker has loaded


def tokens_of(producer: Producer, entries: int, shard: Shard | None = None) -> int:
    """Model tokens of every batch the producer makes over ``shard`` (all the corpus if None)."""
    chunks = producer.chunks(whole_task(producer, entries, shard))
    pad = producer.subwords.pad_id
    return sum(
        batch.real_tokens
        for chunk in chunks
        for batch in make_batches(chunk.inputs, producer.batch_tokens, pad)
    )


def whole_task(producer: Producer, entries: int, shard: Shard | None = None) -> EncodeShard:
    """The task of reading ``shard`` (all the corpus if None), as a pass in one process does."""
    limit = producer.config.max_contexts
    allowance = np.full(entries, limit) if limit else None
    return EncodeShard(0, ShardState.fresh(shard or whole_corpus(producer.corpus)), allowance)


def _shard_tokens(shard: Shard) -> int:
    assert _producer is not None
    return tokens_of(_producer, _entries, shard)


def in_process(
    files: list[str], words: list[str], model: str, max_contexts: int, profile: bool
) -> tuple[int, float]:
    producer = build_producer(files, words, model, max_contexts)
    gc.freeze()
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    tokens = tokens_of(producer, len(words))
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        # The stages docs/benchmarks/throughput.md reports, cumulative: spaCy's tokenizer and its new lexemes,
        # the sentencizer, the matcher, subword encoding and tokenizers' own part of it.
        stages = "_tokenize_affixes|_new_lexeme|sentencizer|_set_starts|vocab.py.*__call__|"
        stages += r"batching.py.*\(encode\)|encode_batch"
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(stages)
    return tokens, seconds


def in_workers(files: list[str], words: list[str], model: str, workers: int) -> tuple[int, float]:
    shards = plan_shards([Path(f) for f in files], shard_bytes=256 * 1024)
    context = multiprocessing.get_context("spawn")
    loaded = context.Barrier(workers + 1)
    with context.Pool(workers, initializer=_init, initargs=(files, words, model, loaded)) as pool:
        loaded.wait(timeout=600)  # raises if a worker never loads
        start = time.perf_counter()
        tokens = sum(pool.imap_unordered(_shard_tokens, shards))
        return tokens, time.perf_counter() - start


def new_chunk_shares(chunks: list[str], parts: int = 10) -> list[float]:
    """Per tenth of the text, the share of space-separated chunks not seen before it.

    spaCy's tokenizer caches each distinct chunk, so this is the share it must split afresh (and
    whose words are new to the vocabulary): it falls as a corpus grows.
    """
    seen: set[str] = set()
    shares = []
    for part in range(parts):
        piece = chunks[part * len(chunks) // parts : (part + 1) * len(chunks) // parts]
        new = 0
        for chunk in piece:
            if chunk not in seen:
                seen.add(chunk)
                new += 1
        shares.append(new / max(1, len(piece)))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to measure")
    parser.add_argument("--repeat", type=int, default=2, help="corpus copies")
    parser.add_argument("--profile", action="store_true", help="profile the single process")
    parser.add_argument("--corpus", help="a text file instead of gensim's Wikipedia + Lee text")
    parser.add_argument("--vocab", help="a word list instead of SimLex-999 + WordSim-353's words")
    parser.add_argument(
        "--model", help="the tokenizer's model folder (default: the offline MiniLM)"
    )
    args = parser.parse_args()
    words, model = vocabulary_words(args.vocab), args.model or default_model()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        text = corpus_lines(args.corpus)
        corpus.write_text("\n".join(text * args.repeat) + "\n")
        files = [str(corpus)]
        print(f"corpus: {corpus.stat().st_size:,} bytes; cores: {os.cpu_count()}")
        chunks = [chunk for line in text for chunk in line.split()]
        print(f"one copy: {len(chunks):,} space-separated chunks, {len(set(chunks)):,} distinct")
        shares = " ".join(f"{100 * share:.1f}" for share in new_chunk_shares(chunks))
        print(f"new chunks per tenth of one copy (%): {shares}")
        for max_contexts in (2000, 0):
            profile = args.profile and max_contexts == 0
            tokens, seconds = in_process(files, words, model, max_contexts, profile)
            print(
                f"1 process, max-contexts {max_contexts}: {tokens:,} tokens in {seconds:.1f} s "
                f"= {tokens / seconds:,.0f} tokens/s"
            )
        for workers in map(int, args.workers.split(",")):
            tokens, seconds = in_workers(files, words, model, workers)
            print(
                f"{workers} worker processes, max-contexts 0: {tokens:,} tokens in {seconds:.1f} s"
                f" = {tokens / seconds:,.0f} tokens/s ({tokens / seconds / workers:,.0f} per worker)"
            )


if __name__ == "__main__":
    main()
