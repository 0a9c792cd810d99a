"""The distill output folder through the Python API: what a run may write into, and writing it."""

from __future__ import annotations

import errno
import threading

import numpy as np
import pytest
from gensim.models import KeyedVectors
from test_atomic import snapshot, user_folder

from roberta_static import DistillConfig, distill
from roberta_static.distill_output import check_output, says_how_to_go_on, write_output
from roberta_static.errors import ConfigError, CorpusError, Interrupted, OutputError, VectorsError
from roberta_static.stopping import Checkpointing
from roberta_static.vectors.static import StaticVectors

VECTORS = StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([2, 1]))
NOT_EMPTY = "folder is not empty; pass --overwrite to replace it"
NOT_OURS = "which roberta-static did not write"


@pytest.fixture()
def unfinished(roberta_dir, corpus_file, vocab_file, tmp_path):
    """An output folder holding only the checkpoint of a run stopped after its first batch."""
    out = tmp_path / "run"
    stop = threading.Event()
    stop.set()
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=1)
    with pytest.raises(Interrupted):
        distill(corpus_file, vocab_file, config, checkpointing=Checkpointing(out, 0, stop))
    return out


def test_check_output_refuses_only_what_a_run_may_not_replace(tmp_path):
    check_output(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty")
    earlier = VECTORS.save(tmp_path / "earlier")
    with pytest.raises(OutputError, match=NOT_EMPTY):
        check_output(earlier)
    check_output(earlier, overwrite=True)
    mine = user_folder(tmp_path / "mine")
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=NOT_OURS):
            check_output(mine, overwrite)


def test_check_output_keeps_an_unfinished_run_for_resume_or_overwrite(unfinished):
    with pytest.raises(OutputError) as caught:
        check_output(unfinished)
    assert str(caught.value) == (
        f"{unfinished}: holds the checkpoint of an unfinished run; pass --resume {unfinished} "
        "to continue or --overwrite to start again"
    )
    check_output(unfinished, resuming=True)
    check_output(unfinished, overwrite=True)
    (unfinished / "notes.txt").write_text("mine")
    for overwrite, resuming in ((False, True), (True, False)):
        with pytest.raises(OutputError, match=NOT_OURS):
            check_output(unfinished, overwrite, resuming=resuming)


def test_write_output_writes_the_vectors_and_their_exports(tmp_path):
    out = write_output(VECTORS, tmp_path / "out", ["kv", "word2vec"])
    assert out == tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "meta.json", "vectors.kv", "vectors.npy", "vectors.txt", "vectors.vocab", "vocab.tsv",
    ]  # fmt: skip
    loaded = StaticVectors.load(out)
    assert loaded.words == VECTORS.words and np.array_equal(loaded.vectors, VECTORS.vectors)
    kv = KeyedVectors.load_word2vec_format(out / "vectors.txt")
    assert np.array_equal(kv["dog"], VECTORS["dog"])
    with pytest.raises(OutputError, match=NOT_EMPTY):
        write_output(VECTORS, out)
    assert sorted(p.name for p in write_output(VECTORS, out, overwrite=True).iterdir()) == [
        "meta.json", "vectors.npy", "vocab.tsv",
    ]  # fmt: skip


def test_write_output_replaces_the_checkpoint_it_finishes_only_when_told(unfinished, tmp_path):
    before = snapshot(tmp_path)
    with pytest.raises(OutputError, match=NOT_EMPTY):
        write_output(VECTORS, unfinished)
    assert snapshot(tmp_path) == before
    write_output(VECTORS, unfinished, finishes_checkpoint=True)
    assert sorted(p.name for p in unfinished.iterdir()) == ["meta.json", "vectors.npy", "vocab.tsv"]


def test_write_output_that_fails_leaves_the_folder_as_it_was(tmp_path):
    out = VECTORS.save(tmp_path / "out")
    before = snapshot(tmp_path)
    broken = StaticVectors(["cat"], np.array([[np.nan, 0]], dtype=np.float32), np.array([1]))
    with pytest.raises(VectorsError, match="NaN"):
        write_output(broken, out, ["kv"], overwrite=True)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("error", "then"),
    [
        (
            CorpusError("docs.jsonl:3: not valid JSON"),
            "the work before it is kept in {checkpoint}: fix the input, then",
        ),
        (OutputError(errno.ENOSPC, "No space left on device"), "free space, then"),
        (OutputError(errno.EACCES, "Permission denied"), "once it can be written,"),
    ],
)
def test_an_error_once_work_is_kept_says_how_to_go_on(error, then, tmp_path):
    checkpointing = Checkpointing(tmp_path)
    checkpointing.written = True
    with pytest.raises(type(error)) as raised, says_how_to_go_on(tmp_path, False, checkpointing):
        raise error
    then = then.format(checkpoint=tmp_path / ".checkpoint")
    assert (
        str(raised.value)
        == f"{error}; {then} resume with: roberta-static distill --resume {tmp_path}"
    )


def test_the_resume_command_names_the_output_options_a_checkpoint_does_not_keep(tmp_path):
    checkpointing = Checkpointing(tmp_path)
    stop = f"stopped; resume with: roberta-static distill --resume {tmp_path}"
    options = " --formats kv,model2vec --sif-coefficient 0.001"
    with (
        pytest.raises(Interrupted) as raised,
        says_how_to_go_on(tmp_path, True, checkpointing, options),
    ):
        raise Interrupted(stop)
    assert str(raised.value) == stop + options
    with (
        pytest.raises(Interrupted) as raised,
        says_how_to_go_on(tmp_path, False, checkpointing, options),
    ):
        raise Interrupted("stopped before any batch was encoded; nothing was saved")
    assert str(raised.value).endswith("nothing was saved")
    checkpointing.written = True
    with (
        pytest.raises(CorpusError) as raised,
        says_how_to_go_on(tmp_path, False, checkpointing, options),
    ):
        raise CorpusError("docs.jsonl:3: not valid JSON")
    assert str(raised.value).endswith(f"--resume {tmp_path}{options}")


def test_an_error_before_any_work_is_kept_or_a_refused_option_is_left_as_it_is(tmp_path):
    nothing_kept = Checkpointing(tmp_path)
    with (
        pytest.raises(CorpusError, match=r"^bad line$"),
        says_how_to_go_on(tmp_path, False, nothing_kept),
    ):
        raise CorpusError("bad line")
    for error in (ConfigError("layers: refused"), Interrupted("stopped; resume with: ...")):
        with pytest.raises(type(error)) as raised, says_how_to_go_on(tmp_path, True, nothing_kept):
            raise error
        assert str(raised.value) == str(error)


def test_write_output_refuses_an_unknown_format_before_writing_anything(tmp_path):
    vectors = StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([2, 1]))
    with pytest.raises(ConfigError, match=r"unknown \['foo'\]; expected some of kv, "):
        write_output(vectors, tmp_path / "out", ["foo"])
    assert not (tmp_path / "out").exists()
