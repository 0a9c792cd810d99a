"""Progress reports follow the work encoded, start where a resumed run starts, and the bar shows them."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from roberta_static import DistillConfig, distill
from roberta_static.cli.progress import DistillProgress
from roberta_static.engine.checkpoint import load_checkpoint
from roberta_static.errors import Interrupted
from roberta_static.progress import Progress, Work
from roberta_static.stopping import Checkpointing

LINE = "The cat sat on the mat with the dog."


def test_work_splits_into_whole_parts_that_add_up():
    parts = Work(1000, 7).split([3, 1, 0, 2])
    assert parts.sum(axis=0).tolist() == [1000, 7]
    assert parts[:, 0].tolist() == [500, 166, 0, 334]
    assert parts[:, 1].tolist() == [3, 1, 0, 3]
    assert Work(5, 1).split([0, 0]).tolist() == [[0, 0], [5, 1]]
    assert Work(5, 1).split([]).shape == (0, 2)


@pytest.fixture()
def even_corpus(tmp_path):
    """The same sentence on every line: bytes done and tokens encoded go in step."""
    path = tmp_path / "even.txt"
    path.write_text(f"{LINE}\n" * 600)
    return path


def _tokens_per_line(roberta_dir) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(roberta_dir)(LINE)["input_ids"])


@pytest.mark.parametrize("workers", [1, 2])
def test_bytes_done_never_run_ahead_of_the_tokens_encoded(
    roberta_dir, even_corpus, workers, monkeypatch
):
    # Many shards, so that two workers read ahead of the encoder.
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8, workers=workers
    )
    reports = []
    distill(even_corpus, ["cat"], config, progress=reports.append)
    assert_in_step_with_the_encoder(reports, roberta_dir, even_corpus)


def assert_in_step_with_the_encoder(reports: list, roberta_dir, even_corpus) -> None:
    """Bytes and sentences done never run ahead of the tokens encoded; they end at the end."""
    reports = [r for r in reports if isinstance(r, Progress)]
    line_bytes, line_tokens = len(LINE) + 1, _tokens_per_line(roberta_dir)
    for report in reports:
        # Lines whose tokens went through the encoder, and no more (one line's rounding).
        assert report.bytes_done <= (report.tokens / line_tokens + 1) * line_bytes, report
        assert report.sentences <= report.tokens / line_tokens + 1, report
    assert [r.bytes_done for r in reports] == sorted(r.bytes_done for r in reports)
    assert reports[0].bytes_done == 0 and reports[-1].bytes_done == even_corpus.stat().st_size
    assert reports[-1].sentences == 600


@pytest.mark.parametrize("workers", [1, 2])
def test_a_resumed_run_starts_at_its_checkpoint(
    roberta_dir, even_corpus, tmp_path, workers, monkeypatch
):
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)
    # Small batches, so that work is summed (and reported done) as the corpus is read: with the
    # default budget this small corpus would wait whole for its batches to fill.
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8, workers=workers,
        batch_tokens=64,
    )  # fmt: skip
    stop, size = threading.Event(), even_corpus.stat().st_size

    def stop_halfway(report):
        if isinstance(report, Progress) and report.bytes_done > size / 2:
            stop.set()

    with pytest.raises(Interrupted, match="resume with"):
        distill(
            even_corpus,
            ["cat"],
            config,
            progress=stop_halfway,
            checkpointing=Checkpointing(tmp_path / "out", 0, stop),
        )
    saved = load_checkpoint(tmp_path / "out")
    # Each shard's bytes before its position; all of them, once done.
    at = lambda position: size if position.file else position.offset  # noqa: E731
    resumed_at = sum(
        at(shard.shard.stop if shard.done else shard.position) - at(shard.shard.start)
        for shard in saved.state.shards
    )
    assert resumed_at > 0
    reports = []
    distill(even_corpus, ["cat"], config, progress=reports.append, resume_from=saved)
    first = next(r for r in reports if isinstance(r, Progress))
    assert first.bytes_done == first.start_bytes == resumed_at
    assert first.sentences == first.tokens == 0
    assert all(r.start_bytes == resumed_at for r in reports if isinstance(r, Progress))


def _rendered(bar: DistillProgress) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(bar._progress.make_tasks_table(bar._progress.tasks))
    return console.file.getvalue()


def test_the_counting_bar_shows_no_encoder_columns():
    with DistillProgress(disable=True) as bar:
        bar.update(Progress("count", 500, 1000))
        bar.update(Progress("distill", 0, 1000, 0, 0))
        bar.update(Progress("distill", 100, 1000, 10, 300))
    counting, distilling = _rendered(bar).splitlines()
    assert counting.startswith("counting words") and "/s" not in counting
    assert "sent/s" in distilling and "tok/s" in distilling


def test_time_left_is_at_this_runs_mean_rate(monkeypatch):
    clock = [0.0]
    with DistillProgress(disable=True) as bar:
        bar._progress.get_time = lambda: clock[0]
        # Resumed at 500 of 1,000: then 100 bytes in 10 s, the last 2 s ten times faster.
        bar.update(Progress("distill", 500, 1000, 0, 0, start_bytes=500))
        clock[0] = 8.0
        bar.update(Progress("distill", 520, 1000, 1, 10, start_bytes=500))
        clock[0] = 10.0
        bar.update(Progress("distill", 600, 1000, 5, 50, start_bytes=500))
    line = _rendered(bar)
    assert "0:00:40" in line  # 400 bytes left at 10 bytes/s
    assert "5 tok/s" in line


def test_the_bar_moves_with_each_batch_while_a_long_chunk_is_summed(roberta_dir, even_corpus):
    from roberta_static.api import distill_from_model
    from roberta_static.model.loading import load_pretrained
    from roberta_static.text.corpus import Corpus
    from roberta_static.text.vocab import Vocabulary

    # One chunk of many small batches: each batch waits until the one before has been reported.
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=10_000, batch_tokens=64
    )
    model, tokenizer = load_pretrained(config)
    reported, forwards, tokens = threading.Event(), [], []

    def progress(report):
        if isinstance(report, Progress) and report.tokens > (tokens[-1] if tokens else 0):
            tokens.append(report.tokens)
            reported.set()

    def after_a_report(module, args):
        if 1 <= len(forwards) <= 4:
            assert reported.wait(60), "no progress report while the chunk was being summed"
            reported.clear()
        forwards.append(1)

    model.register_forward_pre_hook(after_a_report)
    vocab = Vocabulary.from_entries(["cat"])
    distill_from_model(model, tokenizer, Corpus([even_corpus]), vocab, config, progress=progress)
    assert len(forwards) > 5 and len(tokens) > 5


@pytest.mark.parametrize("bar", ["finetune", "tune"])
def test_a_steps_bar_starts_with_its_first_report_and_shows_it(bar):
    from roberta_static.cli.progress import FinetuneProgressBar
    from roberta_static.cli.tune import TuneProgressBar
    from roberta_static.progress import FinetuneProgress, TuneProgress

    if bar == "finetune":
        made, report, shown = (
            FinetuneProgressBar(True),
            FinetuneProgress(3, 10, 1.5, 640),
            "loss 1.500",
        )
    else:
        made, report, shown = (
            TuneProgressBar(True),
            TuneProgress(2, 9, 3, 10, 0.25, 0.125),
            "epoch 2/9",
        )
    with made as progress:
        assert progress._task is None  # nothing shown before the first report
        progress.update(report)
        assert "3/10" in _rendered(progress) and shown in _rendered(progress)
