"""tune: learning from sentence targets, its determinism, bad inputs, and its vectors in use.

The targets are built here as the pass will build them: the tiny BERT's own sentence vectors
(model/teacher.py's pooling of its last layer) and the vocabulary entries of each sentence.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import roberta_static
from roberta_static import DistillConfig, distill
from roberta_static.cli import app
from roberta_static.cli.tune import summary
from roberta_static.errors import ConfigError, OutputError, VectorsError
from roberta_static.formats.exports import export, write_exports
from roberta_static.model.teacher import TeacherPooling, sentence_vectors
from roberta_static.tuning.config import TuneConfig
from roberta_static.tuning.run import held_out_split, tune
from roberta_static.vectors.docvectors import DocWeighting
from roberta_static.vectors.postprocess import remove_axes
from roberta_static.vectors.static import StaticVectors
from roberta_static.vectors.target_files import read_targets, write_targets
from roberta_static.vectors.targets import SentenceTargets, sentence_keys

WORDS = (
    "cat dog bird garden house sun city river tree paris green quiet large runs sleeps sat "
    "chased lives"
).split()
FAST = TuneConfig(batch_size=32, remove_top_pcs=2, max_epochs=30)
runner = CliRunner()


def made_up_texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) + "." for _ in range(count)]


def teacher_targets(model_dir: Path, texts: list[str], words: list[str]) -> SentenceTargets:
    """Each text one sentence: the model's mean-pooled, normalised vector and its entries."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    pooling = TeacherPooling("mean", normalize=True)
    vectors = sentence_vectors(hidden, batch["attention_mask"], pooling).numpy()
    index = {word: row for row, word in enumerate(words)}
    rows = [[index[w] for w in text.rstrip(".").split() if w in index] for text in texts]
    targets = SentenceTargets(10_000, vectors.shape[1], pooling.to_dict())
    entries = np.array([row for sentence in rows for row in sentence], dtype=np.int64)
    indptr = np.cumsum([0] + [len(sentence) for sentence in rows])
    targets.add(sentence_keys(texts), vectors, indptr, entries, np.ones(len(entries), np.int64))
    return targets


@pytest.fixture(scope="module")
def with_targets(bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vectors folder distilled from the tiny BERT over made-up text, keeping its targets."""
    texts = made_up_texts(150)
    config = DistillConfig(
        model=str(bert_dir), min_count=1, max_contexts=0, device="cpu", sentence_targets=10_000
    )
    vectors = distill(texts=texts, config=config)
    folder = tmp_path_factory.mktemp("tune") / "vectors"
    vectors.save(folder)
    return folder


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


def test_tuning_lowers_the_held_out_loss_and_saves_vectors_and_weights(with_targets, tmp_path):
    reports = []
    tuned = tune(with_targets, tmp_path / "tuned", FAST, progress=reports.append)
    record = tuned.meta["tune"]
    loss = record["held_out_loss"]
    assert loss["best"] < loss["start"] * (1 - 1e-3), loss
    assert record["best_epoch"] >= 1 and record["targets"]["held_out"] == 15
    assert record["config"] == FAST.to_dict() and record["targets"]["pooling"]["mode"] == "mean"
    assert reports and reports[-1].epoch == record["epochs"]
    back = StaticVectors.load(tmp_path / "tuned")
    np.testing.assert_array_equal(back.vectors, tuned.vectors)
    np.testing.assert_array_equal(back.weights, tuned.weights)
    np.testing.assert_array_equal(back.offset, tuned.offset)
    assert back.words == StaticVectors.load(with_targets).words
    assert (tmp_path / "tuned" / "weights.npy").is_file()
    assert (tmp_path / "tuned" / "offset.npy").is_file()
    assert not (tmp_path / "tuned" / "targets").exists()


def start_of(folder: Path, config: TuneConfig) -> tuple[np.ndarray, np.ndarray]:
    """What training starts from: the weighted doc vectors' post-processed rows and weights."""
    vectors = StaticVectors.load(folder)
    weighting = DocWeighting.fit(vectors, config.remove_top_pcs, config.sif_coefficient)
    return remove_axes(vectors.vectors - weighting.mean, weighting.axes), weighting.weights


def test_a_step_size_too_small_to_move_keeps_the_start(with_targets, tmp_path):
    config = TuneConfig(
        batch_size=32, remove_top_pcs=2, learning_rate=1e-30, patience=2, head="drop"
    )
    tuned = tune(with_targets, tmp_path / "tuned", config)
    record = tuned.meta["tune"]
    assert record["best_epoch"] == 0 and record["epochs"] == 2
    assert record["held_out_loss"]["best"] == record["held_out_loss"]["start"]
    assert record["head"].endswith("dropped") and tuned.offset is None
    vectors, weights = start_of(with_targets, config)
    np.testing.assert_allclose(tuned.vectors, vectors, atol=1e-6)
    np.testing.assert_allclose(tuned.weights, weights, rtol=1e-6)


def held_out_cosine(folder: Path, tuned: StaticVectors) -> float:
    """The mean cosine to the teacher of the tuned text vectors of the held-out sentences."""
    targets = read_targets(folder, tuned.words)
    _, held = held_out_split(targets, TuneConfig(**tuned.meta["tune"]["config"]))
    weighted = tuned.weighted_vectors().astype(np.float64)
    cosines = []
    for sentence in held:
        where = slice(targets.indptr[sentence], targets.indptr[sentence + 1])
        counts = targets.counts[where]
        text = (weighted[targets.entries[where]] * counts[:, None]).sum(axis=0) / counts.sum()
        target = targets.vectors[sentence]
        cosines.append(text @ target / np.linalg.norm(text) / np.linalg.norm(target))
    return float(np.mean(cosines))


@pytest.mark.parametrize("head", ["fold", "drop"])
def test_a_folded_head_makes_text_vectors_the_head_s_output(with_targets, tmp_path, head):
    tuned = tune(with_targets, tmp_path / "tuned", dataclasses.replace(FAST, head=head))
    reported = tuned.meta["tune"]["held_out_cosine"]["best"]
    assert (tuned.offset is not None) == (head == "fold")
    # Folded, a tuned text's vector is what the head gave in training; dropped, it is not, and
    # the summary says whose cosine it reports.
    assert (held_out_cosine(with_targets, tuned) == pytest.approx(reported, abs=1e-4)) == (
        head == "fold"
    )
    said = summary(tuned.meta["tune"], tmp_path / "tuned")
    assert ("cosine to the teacher through the dropped head" in said) == (head == "drop")


def test_the_same_seed_gives_the_same_vectors(with_targets, tmp_path):
    first = tune(with_targets, tmp_path / "a", FAST)
    again = tune(with_targets, tmp_path / "b", FAST)
    np.testing.assert_array_equal(first.vectors, again.vectors)
    np.testing.assert_array_equal(first.weights, again.weights)
    assert first.meta["tune"]["held_out_loss"] == again.meta["tune"]["held_out_loss"]
    other = tune(with_targets, tmp_path / "c", TuneConfig(**{**FAST.to_dict(), "seed": 1}))
    assert not np.array_equal(first.vectors, other.vectors)


def test_the_split_holds_out_sentences_with_entries_by_the_seed():
    targets = SentenceTargets(100, 1)
    lengths = [0 if i % 7 == 0 else 2 for i in range(40)]
    indptr = np.cumsum([0, *lengths])
    keys = np.arange(40, dtype=np.uint64)
    targets.add(keys, np.zeros((40, 1)), indptr, np.zeros(indptr[-1], int), np.ones(indptr[-1]))
    train, held = held_out_split(targets, TuneConfig(held_out=0.25))
    assert len(held) == 8 and len(train) == 26  # 34 sentences hold an entry
    assert not set(train) & set(held) and all(lengths[i] for i in [*train, *held])
    assert held.tolist() == held_out_split(targets, TuneConfig(held_out=0.25))[1].tolist()
    assert held.tolist() != held_out_split(targets, TuneConfig(held_out=0.25, seed=5))[1].tolist()


def test_the_python_api_is_the_package_s(with_targets, tmp_path):
    tuned = roberta_static.tune(
        with_targets, tmp_path / "tuned", roberta_static.TuneConfig(max_epochs=1)
    )
    assert tuned.weights is not None


# Bad inputs: each a one-line error, and nothing written.
def run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_line_error(result, message: str, out: Path) -> None:
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: ") and message in result.output, result.output
    assert result.output.count("\n") == 1
    assert not out.exists()


def test_a_folder_without_targets_is_refused(with_targets, tmp_path):
    folder = copy_of(with_targets, tmp_path)
    shutil.rmtree(folder / "targets")
    result = run("tune", folder, "--out", tmp_path / "out")
    assert_one_line_error(result, "holds no sentence targets (targets/)", tmp_path / "out")


def test_too_few_sentences_are_refused(bert_dir, with_targets, tmp_path):
    folder = copy_of(with_targets, tmp_path)
    shutil.rmtree(folder / "targets")
    words = StaticVectors.load(folder).words
    write_targets(teacher_targets(bert_dir, made_up_texts(6), words), folder, words)
    result = run("tune", folder, "--out", tmp_path / "out")
    assert_one_line_error(
        result, "6 sentences with vocabulary entries are too few", tmp_path / "out"
    )


def test_targets_of_other_vectors_are_refused(with_targets, tmp_path):
    folder = copy_of(with_targets, tmp_path)
    vectors = StaticVectors.load(folder)
    kept = StaticVectors(
        vectors.words[:-1], vectors.vectors[:-1], vectors.counts[:-1], vectors.meta
    )
    shutil.copytree(folder / "targets", tmp_path / "targets")
    kept.save(folder, overwrite=True)  # the vectors change, the targets stay
    shutil.copytree(tmp_path / "targets", folder / "targets")
    result = run("tune", folder, "--out", tmp_path / "out")
    assert_one_line_error(result, "the targets were written for other vectors", tmp_path / "out")


def test_tuned_vectors_and_exports_are_refused(with_targets, tmp_path):
    tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=1))
    result = run("tune", tmp_path / "tuned", "--out", tmp_path / "out")
    assert_one_line_error(result, "tuned already", tmp_path / "out")
    folder = copy_of(with_targets, tmp_path)
    export(folder, ["model2vec"])
    result = run("tune", folder / "model2vec", "--out", tmp_path / "out")
    assert_one_line_error(result, "not a roberta-static vectors folder", tmp_path / "out")


def test_the_output_is_never_the_source_nor_a_foreign_folder(with_targets, tmp_path):
    result = run("tune", with_targets, "--out", with_targets)
    assert result.exit_code == 1 and "is the folder being read" in result.output
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match="which roberta-static did not write"):
        tune(with_targets, foreign, overwrite=True)
    assert (foreign / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--held-out", "0.7"], "--held-out"),  # typer's wording varies by release
        (["--learning-rate", "0"], "--learning-rate"),
        (["--loss", "hinge"], "--loss"),
        (["--head", "sideways"], "--head"),
        (["--sif-coefficient", "0"], "--sif-coefficient"),
    ],
)
def test_bad_options_are_usage_errors(with_targets, tmp_path, args, message):
    result = run("tune", with_targets, "--out", tmp_path / "out", *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_a_device_this_machine_lacks_is_one_line(with_targets, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = run("tune", with_targets, "--out", tmp_path / "out", "--device", "cuda")
    assert_one_line_error(result, "device: cuda is not available on this machine", tmp_path / "out")


def test_a_run_that_learns_nothing_says_so(with_targets, tmp_path):
    out = tmp_path / "out"
    result = run("tune", with_targets, "--out", out, "--learning-rate", "50", "--patience", "1")
    assert result.exit_code == 0, result.output
    assert (
        "at 0," in result.output and "warning: no epoch bettered the held-out loss" in result.output
    )
    learned = run(
        "tune",
        with_targets,
        "--out",
        tmp_path / "learned",
        "--max-epochs",
        "30",
        "--batch-size",
        "32",
        "--remove-top-pcs",
        "2",  # FAST's options: they better the start clearly on this tiny text, not by a hair
    )
    assert "warning" not in learned.output


def test_bad_options_are_refused_before_anything_is_read():
    with pytest.raises(ConfigError, match="held_out: must be in"):
        TuneConfig(held_out=0)
    with pytest.raises(ConfigError, match="device: tune runs on one device"):
        TuneConfig(device="cuda:0,cuda:1")
    with pytest.raises(ConfigError, match="loss: expected one of mse, cosine"):
        TuneConfig(loss="hinge")


def test_the_command_trains_reports_and_info_shows_how(with_targets, tmp_path):
    out = tmp_path / "tuned"
    result = run("tune", with_targets, "--out", out, "--max-epochs", "3", "--batch-size", "32")
    assert result.exit_code == 0, result.output
    assert "held-out loss" in result.output and f"wrote {out}" in result.output
    record = json.loads((out / "meta.json").read_text())["tune"]
    assert record["config"]["max_epochs"] == 3
    info = run("info", out)
    assert "tune:" in info.output and "held out loss" in info.output
    assert "sif coefficient not set (default)" in info.output  # an option left unset


# The learned weights in use.
def test_exports_hold_each_row_times_its_weight_plus_the_offset(with_targets, tmp_path):
    tuned = tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=2))
    written = write_exports(tuned, tmp_path, ["word2vec", "model2vec"])
    assert written
    back = StaticVectors.load(tmp_path / "vectors.txt")
    expected = tuned.vectors * tuned.weights[:, None] + tuned.offset
    rows = [tuned.get_index(word) for word in back.words]
    np.testing.assert_allclose(back.vectors, expected[rows], rtol=1e-5, atol=1e-6)
    model2vec = StaticVectors.load(tmp_path / "model2vec")
    rows = [tuned.get_index(word) for word in model2vec.words]
    np.testing.assert_allclose(model2vec.vectors, expected[rows], rtol=1e-6)
    card = (tmp_path / "model2vec" / "README.md").read_text(encoding="utf-8")
    assert "| weighting | learned by `roberta-static tune`" in card and "then tuned" in card
    with pytest.raises(ConfigError, match="learned weights replace SIF weighting"):
        write_exports(tuned, tmp_path / "again", ["model2vec"], sif_coefficient=1e-3)


def test_spacy_weighted_doc_vector_is_the_mean_of_weight_times_vector_plus_the_offset(
    with_targets, tmp_path
):
    spacy = pytest.importorskip("spacy")
    tuned = tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=2))
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(tmp_path / "tuned")})
    text = "the cat sat in the green garden"
    known = [word for word in text.split() if word in tuned]
    rows = [tuned.get_index(word) for word in known]
    expected = (tuned.vectors[rows] * tuned.weights[rows, None]).mean(axis=0) + tuned.offset
    np.testing.assert_allclose(nlp(text).vector, expected, rtol=1e-5, atol=1e-7)
    # Saved with the pipeline and loaded back, it is the same.
    nlp.to_disk(tmp_path / "pipeline")
    np.testing.assert_allclose(
        spacy.load(tmp_path / "pipeline")(text).vector, expected, rtol=1e-5, atol=1e-7
    )
    plain = spacy.blank("en")
    plain.add_pipe(
        "roberta_static", config={"vectors": str(tmp_path / "tuned"), "doc_vector": "mean"}
    )
    spacy_mean = tuned.vectors[rows].sum(axis=0) / len(text.split())  # unknown words count 0
    np.testing.assert_allclose(plain(text).vector, spacy_mean, rtol=1e-5)


def test_the_start_can_be_what_the_component_computes_for_the_untuned_vectors(with_targets):
    spacy = pytest.importorskip("spacy")
    config = TuneConfig(remove_top_pcs=4, sif_coefficient=1e-3)
    vectors, weights = start_of(with_targets, config)
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(with_targets)})
    untuned = StaticVectors.load(with_targets)
    text = "the dog chased the cat by the river"
    rows = [untuned.get_index(word) for word in text.split() if word in untuned]
    start = (vectors[rows] * weights[rows, None]).mean(axis=0)
    np.testing.assert_allclose(nlp(text).vector, start, rtol=1e-4, atol=1e-6)


def test_vectors_without_weights_are_as_before(with_targets, tmp_path):
    plain = StaticVectors.load(with_targets)
    assert plain.weights is None
    np.testing.assert_array_equal(plain.weighted_vectors(), plain.vectors)
    plain.save(tmp_path / "saved")
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == [
        "meta.json",
        "vectors.npy",
        "vocab.tsv",
    ]
    write_exports(plain, tmp_path, ["word2vec"])
    np.testing.assert_allclose(
        StaticVectors.load(tmp_path / "vectors.txt")["cat"], plain["cat"], rtol=1e-6
    )


def test_tuned_folders_do_not_merge(with_targets, tmp_path):
    tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=1))
    with pytest.raises(VectorsError, match="tuned vectors do not average"):
        StaticVectors.load_merged([tmp_path / "tuned", with_targets])


def test_damaged_weights_are_a_one_line_error(with_targets, tmp_path):
    tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=1))
    np.save(tmp_path / "tuned" / "weights.npy", np.ones(3, np.float32))
    with pytest.raises(VectorsError, match="words need .* weights"):
        StaticVectors.load(tmp_path / "tuned")
    np.save(tmp_path / "tuned" / "weights.npy", np.ones(3, np.float64))
    with pytest.raises(VectorsError, match="weights.npy: expected finite float32 weights"):
        StaticVectors.load(tmp_path / "tuned")


class _Runs:
    """Unpickling this creates ``ran``: a file only code run by ``pickle.load`` would make."""

    def __init__(self, ran: Path) -> None:
        self.ran = ran

    def __reduce__(self):  # noqa: ANN204
        return (Path.touch, (self.ran,))


@pytest.mark.parametrize("name", ["weights.npy", "offset.npy", "vectors.npy"])
@pytest.mark.parametrize("how", ["npy of objects", "bare pickle"])
def test_a_pickle_planted_in_a_tuned_folder_is_never_unpickled(with_targets, tmp_path, name, how):
    tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=1))
    planted, ran = tmp_path / "tuned" / name, tmp_path / "ran"
    if how == "bare pickle":
        planted.write_bytes(pickle.dumps(_Runs(ran)))
    else:
        np.save(planted, np.array([_Runs(ran)] * 3, dtype=object), allow_pickle=True)
    with pytest.raises(VectorsError, match=f"{name}: "):
        StaticVectors.load(tmp_path / "tuned")
    assert not ran.exists()


def test_a_damaged_offset_is_a_one_line_error(with_targets, tmp_path):
    tune(with_targets, tmp_path / "tuned", TuneConfig(max_epochs=1))
    np.save(tmp_path / "tuned" / "offset.npy", np.ones(3, np.float32))
    with pytest.raises(VectorsError, match="offset.npy: expected 32 values, got 3"):
        StaticVectors.load(tmp_path / "tuned")
    (tmp_path / "tuned" / "weights.npy").unlink()
    with pytest.raises(VectorsError, match="offset.npy: an offset needs weights.npy beside it"):
        StaticVectors.load(tmp_path / "tuned")
    np.save(
        tmp_path / "tuned" / "weights.npy",
        np.ones(len(StaticVectors.load(with_targets)), np.float32),
    )
    np.save(tmp_path / "tuned" / "offset.npy", np.full(32, np.nan, np.float32))
    with pytest.raises(VectorsError, match="offset.npy: expected finite float32 offset"):
        StaticVectors.load(tmp_path / "tuned")
    (tmp_path / "tuned" / "offset.npy").write_bytes(b"hello")
    with pytest.raises(VectorsError, match=r"offset.npy: not a .npy file \(a pickle is never"):
        StaticVectors.load(tmp_path / "tuned")


def test_the_targets_the_pass_kept_read_back(with_targets):
    # The tiny BERT has no sentence-transformers modules: the mean of its last layer.
    targets = read_targets(with_targets, StaticVectors.load(with_targets).words)
    assert len(targets) == 150 and targets.pooling == {
        "mode": "mean",
        "normalize": False,
        "source": TeacherPooling().source,
    }
