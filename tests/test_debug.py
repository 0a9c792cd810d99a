"""--debug and ROBERTA_STATIC_DEBUG: an error's whole story, a worker's traceback included; logs."""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle

import pytest
from conftest import CORPUS_LINES
from typer.testing import CliRunner
from worker_probe import serve_failing

from roberta_static import DistillConfig, distill
from roberta_static.cli import app
from roberta_static.debug import (
    RemoteTraceback,
    format_story,
    keep_traceback,
    set_debugging,
    whole_story,
)
from roberta_static.engine.messages import Failure
from roberta_static.engine.producer import Producer
from roberta_static.engine.worker import worker_failure
from roberta_static.errors import ConfigError, CorpusError

runner = CliRunner()


@pytest.fixture(autouse=True)
def _debugging_off():
    yield
    set_debugging(False)


def a_bug_in_the_cpu_side(*args, **kwargs):
    raise ValueError("a bug in the CPU side")


def test_an_error_keeps_the_traceback_where_it_was_raised_through_pickling():
    try:
        a_bug_in_the_cpu_side()
    except ValueError as error:
        failure = worker_failure(error)
    assert str(failure) == "worker failed: ValueError: a bug in the CPU side"
    text = failure.remote_traceback
    assert text.startswith(f"raised in process {os.getpid()} on ")
    assert "in a_bug_in_the_cpu_side" in text and text.endswith(
        "ValueError: a bug in the CPU side\n"
    )
    again = pickle.loads(pickle.dumps(failure))
    assert (type(again), str(again), again.remote_traceback) == (CorpusError, str(failure), text)
    option = keep_traceback(ConfigError("must be >= 1", field="pca"), failure)
    again = pickle.loads(pickle.dumps(option))
    assert (again.field, again.problem) == ("pca", "must be >= 1")
    assert again.remote_traceback == option.remote_traceback
    assert keep_traceback(option, ValueError("later")).remote_traceback == again.remote_traceback


def test_a_worker_process_s_error_arrives_with_its_traceback():
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    worker = context.Process(target=serve_failing, args=(results,))
    worker.start()
    failure = results.get(timeout=120)
    worker.join(timeout=120)
    error = failure.error
    assert isinstance(failure, Failure)
    assert str(error) == "worker failed: ValueError: a bug in the CPU side"
    assert worker.pid != os.getpid()
    assert error.remote_traceback.startswith(f"raised in process {worker.pid} on ")
    assert "worker_probe.py" in error.remote_traceback and "in chunks" in error.remote_traceback


def test_a_ray_task_s_errors_keep_their_traceback():
    from roberta_static.engine.ray.tasks import _one_line_errors

    with pytest.raises(CorpusError) as caught, _one_line_errors():
        a_bug_in_the_cpu_side()
    assert str(caught.value) == "worker failed: ValueError: a bug in the CPU side"
    assert "in a_bug_in_the_cpu_side" in caught.value.remote_traceback
    with pytest.raises(CorpusError) as caught, _one_line_errors():
        raise CorpusError("docs.jsonl:3: not valid JSON")
    assert caught.value.remote_traceback.endswith("CorpusError: docs.jsonl:3: not valid JSON\n")


def test_the_whole_story_shows_hidden_causes_and_the_remote_traceback():
    try:
        try:
            {}["key"]
        except KeyError:
            raise CorpusError("one line for the user") from None
    except CorpusError as error:
        hidden = error
    assert "KeyError" not in "".join(format_story(CorpusError("other")))
    hidden.remote_traceback = "raised in process 1 on host:\nTraceback ...\nValueError: deep\n"
    story = format_story(hidden)
    assert "KeyError: 'key'" in story and "ValueError: deep" in story
    assert isinstance(hidden.__cause__, RemoteTraceback) and whole_story(hidden) is hidden
    assert story.rstrip().endswith("CorpusError: one line for the user")


@pytest.fixture()
def buggy_cpu_side(monkeypatch):
    monkeypatch.setattr(Producer, "chunks", a_bug_in_the_cpu_side)


def test_debug_prints_the_full_traceback_and_the_log_before_the_one_line(
    buggy_cpu_side, roberta_dir, corpus_file, vocab_file, tmp_path
):
    args = ["distill", str(corpus_file), "--vocab", str(vocab_file), "-m", str(roberta_dir),
            "-l", "1", "-o", str(tmp_path / "out"), "-q"]  # fmt: skip
    plain = runner.invoke(app, args)
    assert (plain.exit_code, plain.output) == (
        1,
        "error: worker failed: ValueError: a bug in the CPU side\n",
    )
    debugged = runner.invoke(app, ["--debug", *args])
    lines = debugged.output.splitlines()
    assert debugged.exit_code == 1 and lines[-1] == plain.output.strip()
    assert "roberta_static.api: loading the model" in debugged.output
    assert "roberta_static: distill failed: worker failed: ValueError" in debugged.output
    story = debugged.output[debugged.output.index("roberta_static.debug.RemoteTraceback") :]
    assert "in a_bug_in_the_cpu_side" in story and "CorpusError: worker failed" in story
    assert not (tmp_path / "out").exists()
    assert runner.invoke(app, args).output == plain.output  # --debug is off again


def test_the_python_api_tells_all_with_the_environment_variable(
    buggy_cpu_side, roberta_dir, monkeypatch, caplog
):
    config = DistillConfig(model=str(roberta_dir), layers="1")
    caplog.set_level(logging.INFO, logger="roberta_static")
    with pytest.raises(CorpusError) as caught:
        distill(texts=CORPUS_LINES, vocab=["cat"], config=config)
    assert caught.value.__cause__ is None
    assert "loading the model" in caplog.text
    assert "distill failed: worker failed: ValueError: a bug in the CPU side" in caplog.text
    monkeypatch.setenv("ROBERTA_STATIC_DEBUG", "1")
    with pytest.raises(CorpusError) as caught:
        distill(texts=CORPUS_LINES, vocab=["cat"], config=config)
    assert isinstance(caught.value.__cause__, RemoteTraceback)
    assert "in a_bug_in_the_cpu_side" in str(caught.value.__cause__)


def test_debugging_prints_the_log_once_and_stops_when_switched_off():
    logger = logging.getLogger("roberta_static")
    before = list(logger.handlers)
    set_debugging(True)
    set_debugging(True)
    assert len(logger.handlers) == len(before) + 1 and logger.level == logging.DEBUG
    set_debugging(False)
    assert logger.handlers == before and logger.level == logging.NOTSET
