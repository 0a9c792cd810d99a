"""The Ray engine: progress in step with the encoders; resuming batches a local run left."""

from __future__ import annotations

import pytest
from conftest import CORPUS_LINES
from test_progress import LINE, assert_in_step_with_the_encoder
from test_workers import assert_same_vectors, stopped_with_batches_left

from roberta_static import DistillConfig, distill
from roberta_static.progress import Progress

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


def test_batches_left_by_a_stopped_local_run_are_summed_on_ray(
    roberta_dir, vocab_file, tmp_path, monkeypatch
):
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 30) + "\n")
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0)
    serial = distill(corpus, vocab_file, config)
    saved = stopped_with_batches_left(roberta_dir, corpus, vocab_file, tmp_path / "out")
    reports = []
    ray_config = config.replace(engine="ray", encoders=1)  # the encoder actors
    on_ray = distill(corpus, vocab_file, ray_config, reports.append, resume_from=saved)
    assert_same_vectors(serial, on_ray)
    first = next(report for report in reports if isinstance(report, Progress))
    assert first.bytes_done == first.start_bytes > 0 and first.tokens == 0  # at the checkpoint
    for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
        assert on_ray.meta["stats"][key] == serial.meta["stats"][key], key


def test_ray_reports_bytes_once_the_encoders_added_them(roberta_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)
    corpus = tmp_path / "even.txt"
    corpus.write_text(f"{LINE}\n" * 600)
    config = DistillConfig(
        model=str(roberta_dir),
        layers="1",
        max_contexts=0,
        chunk_sentences=8,
        engine="ray",
        encoders=1,
    )
    reports = []
    distill(corpus, ["cat"], config, progress=reports.append)
    assert_in_step_with_the_encoder(reports, roberta_dir, corpus)
