"""Output folders: what may be replaced (only what roberta-static wrote), and what a failure leaves."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from roberta_static.atomic import check_output_dir, output_lock
from roberta_static.engine.checkpoint import checkpoint_entries
from roberta_static.errors import OutputError
from roberta_static.formats.exports import export, vectors_folder_entries
from roberta_static.outputs import sweep_folder_entries
from roberta_static.quality.sweep import write_csv
from roberta_static.vectors.static import StaticVectors

VECTORS = StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([2, 1]))
NOT_OURS = "which roberta-static did not write; choose a new or empty output folder"


def snapshot(root):
    """Every path under ``root`` with its bytes (None for a folder)."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


def user_folder(folder):
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "sub" / "thesis.tex").write_text("\\section{Results}")
    return folder


def refusal(root, target, overwrite=True):
    """Save into ``target``, which must be refused with nothing under ``root`` changed: why."""
    before = snapshot(root)
    with pytest.raises(OutputError) as caught:
        VECTORS.save(target, overwrite=overwrite)
    assert snapshot(root) == before
    return str(caught.value)


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_with_user_files_is_refused_and_untouched(tmp_path, overwrite):
    out = user_folder(tmp_path / "mine")
    assert refusal(tmp_path, out, overwrite) == (
        f"{out}: holds notes.txt, sub/, {NOT_OURS} (--overwrite replaces only roberta-static's "
        "own outputs)"
    )


def test_our_output_with_exports_is_replaced_but_not_once_a_user_file_joined_it(tmp_path):
    out = tmp_path / "out"
    VECTORS.save(out)
    export(out, ["kv", "word2vec", "word2vec-bin"])
    inode = out.stat().st_ino
    VECTORS.save(out, overwrite=True)
    assert out.stat().st_ino != inode
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "vectors.npy", "vocab.tsv"]
    (out / "notes.txt").write_text("mine")
    assert f"holds notes.txt, {NOT_OURS}" in refusal(tmp_path, out)


def test_what_marks_a_folder_as_ours(tmp_path):
    legacy = tmp_path / "legacy"  # written before meta.json had a format marker
    VECTORS.save(legacy)
    meta = json.loads((legacy / "meta.json").read_text())
    del meta["format"]
    (legacy / "meta.json").write_text(json.dumps({**meta, "package": {"name": "roberta-static"}}))
    assert vectors_folder_entries(legacy) is not None
    (legacy / "meta.json").write_text(json.dumps({"lang": "en", "name": "pipeline"}))
    assert vectors_folder_entries(legacy) is None
    (legacy / "meta.json").write_text("not json")
    assert vectors_folder_entries(legacy) is None

    run = tmp_path / "run"  # an unfinished distill run: only its checkpoint
    (run / ".checkpoint").mkdir(parents=True)
    assert checkpoint_entries(run) is None
    (run / ".checkpoint" / "state.json").write_text("{}")
    check_output_dir(run, True, [vectors_folder_entries, checkpoint_entries])
    (run / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=f"holds notes.txt, {NOT_OURS}"):
        check_output_dir(run, True, [vectors_folder_entries, checkpoint_entries])

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    write_csv([], sweep / "sweep.csv")
    check_output_dir(sweep, True, [sweep_folder_entries])
    (sweep / "sweep.csv").write_text("name,score\n")
    with pytest.raises(OutputError, match=f"holds sweep.csv, {NOT_OURS}"):
        check_output_dir(sweep, True, [sweep_folder_entries])


@pytest.mark.parametrize("spelling", [".", "..", "{work}", "{work}/.."])
def test_the_working_folder_and_its_ancestors_are_refused_leaving_nothing(
    tmp_path, monkeypatch, spelling
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    target = spelling.format(work=work)
    for overwrite in (False, True):
        assert refusal(tmp_path, target, overwrite) == (
            f"{target}: is the current folder or holds it, and cannot be replaced; "
            "choose an output folder inside it"
        )


def test_a_mount_point_and_a_path_ending_in_dotdot_are_refused(tmp_path, monkeypatch):
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.setattr(os.path, "ismount", lambda path: os.fspath(path) == str(disk.resolve()))
    assert "disk: is a mount point, and cannot be replaced" in refusal(tmp_path, disk)
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert "name the output folder itself" in refusal(tmp_path, tmp_path / "a" / "b" / "..")


@pytest.mark.parametrize("failing_call", [1, 2])
def test_a_failed_swap_keeps_the_previous_output_and_leaves_no_debris(
    tmp_path, monkeypatch, failing_call
):
    out = tmp_path / "out"
    VECTORS.save(out)
    before = snapshot(tmp_path)
    real_replace = os.replace
    calls = []

    def flaky_replace(source, target):
        calls.append(source)
        if len(calls) == failing_call:  # 1: the old output moving aside; 2: the new moving in
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OutputError, match=r"writing failed \(Device or resource busy\)"):
        StaticVectors(["bird"], np.ones((1, 2)), np.array([1])).save(out, overwrite=True)
    assert snapshot(tmp_path) == before


def test_a_full_disk_says_what_it_left_a_new_folder_and_an_earlier_one(tmp_path, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    new, earlier = tmp_path / "new" / "out", tmp_path / "out"
    VECTORS.save(earlier)
    monkeypatch.setattr(np, "save", no_space)
    failed = "writing failed (No space left on device);"
    assert refusal(tmp_path, new) == f"{new}: {failed} nothing was left behind"
    assert refusal(tmp_path, earlier) == f"{earlier}: {failed} its previous contents are unchanged"


HOLD = """
import sys
from roberta_static.atomic import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_held_output_folder_is_refused_by_any_name_until_its_holder_ends(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "link").symlink_to(out)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        for name in (out, tmp_path / "link", tmp_path / "." / "out"):
            with pytest.raises(OutputError) as caught, output_lock(name):
                pass
            assert str(caught.value) == (
                f"{name}: another roberta-static run is writing it (process {holder.pid}); "
                "wait for it to end, or choose another output folder"
            )
    finally:
        holder.kill()  # SIGKILL: the holder ends without releasing anything itself
        holder.wait()
    assert (tmp_path / ".out.lock").read_text() == f"{holder.pid}\n"  # left by the crash
    with output_lock(out):
        assert (tmp_path / ".out.lock").read_text() == f"{os.getpid()}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "out"]


def test_the_lock_makes_missing_parents_and_removes_them_if_left_empty(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    with output_lock(out):
        assert (tmp_path / "a" / "b" / ".out.lock").is_file()
    assert not (tmp_path / "a").exists()
    with output_lock(out):
        VECTORS.save(out)
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["out"]
