from __future__ import annotations

import csv

import numpy as np
import pytest
from test_atomic import snapshot, user_folder
from typer.testing import CliRunner

from roberta_static import DistillConfig, distill
from roberta_static.cli import app
from roberta_static.errors import OutputError
from roberta_static.quality.evaluate import PairScores
from roberta_static.quality.sweep import (
    Candidate,
    SweepResult,
    candidates,
    check_sweep_folder,
    layer_matrix,
    run_sweep,
    write_sweep,
)
from roberta_static.vectors.postprocess import PostProcessing


def test_sweep_layers_equal_separate_runs(roberta_dir, corpus_file, vocab_file):
    all_layers = distill(
        corpus_file,
        vocab_file,
        DistillConfig(model=str(roberta_dir), layers="0-2", combine="concat"),
    )
    for layers, combine in [((0,), "mean"), ((2,), "mean"), ((1, 2), "mean"), ((0, 1), "concat")]:
        spec = ",".join(map(str, layers))
        alone = distill(
            corpus_file,
            vocab_file,
            DistillConfig(model=str(roberta_dir), layers=spec, combine=combine),
        )
        np.testing.assert_allclose(
            layer_matrix(all_layers, 32, Candidate(layers, combine)), alone.vectors, atol=1e-5
        )


def test_run_sweep_scores_every_candidate(roberta_dir, corpus_file, vocab_file, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "cat\tdog\t8\ncat\tgarden\t2\nparis\tnew york\t6\ndog\tgarden\t3\ncat\tzebra\t5\n"
    )
    results = run_sweep(
        corpus_file, vocab_file, DistillConfig(model=str(roberta_dir)), [str(pairs)]
    )
    assert len(results) == len(candidates(2)) * 3
    first = results[0]
    assert first.candidate.label == "layer 0" and first.postprocessing == "none"
    assert first.scores["pairs.tsv"].covered == 4 and first.scores["pairs.tsv"].oov_pairs == [
        ("cat", "zebra")
    ]


def test_sweep_and_evaluate_commands(roberta_dir, corpus_file, vocab_file, tmp_path):
    runner = CliRunner()
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t8\ncat\tgarden\t2\nparis\tgarden\t6\ndog\tgarden\t3\n")
    out = tmp_path / "sweep"
    inputs = [str(corpus_file), "--vocab", str(vocab_file), "--model", str(roberta_dir), "-q"]
    result = runner.invoke(app, ["sweep", *inputs, "--out", str(out), "--dataset", str(pairs)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert len(rows) == len(candidates(2)) * 3 and {r["candidate"] for r in rows} >= {
        "layer 0",
        "mean 0-2",
    }
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert "best on pairs.tsv" in result.output

    vectors = tmp_path / "vectors"
    distilled = runner.invoke(app, ["distill", *inputs, "--out", str(vectors), "-l", "1"])
    assert distilled.exit_code == 0, distilled.output
    evaluated = runner.invoke(app, ["evaluate", str(vectors), "--dataset", str(pairs), "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    bad = runner.invoke(app, ["evaluate", str(vectors), "--dataset", "missing.tsv"])
    assert bad.exit_code == 1 and bad.output.startswith("error: missing.tsv: no such file")

    processed = tmp_path / "processed"
    assert (
        runner.invoke(
            app, ["postprocess", str(vectors), str(processed), "--center", "--normalize"]
        ).exit_code
        == 0
    )
    from roberta_static.vectors.static import StaticVectors

    back = StaticVectors.load(processed)
    np.testing.assert_allclose(np.linalg.norm(back.vectors, axis=1), 1, atol=1e-5)
    nothing = runner.invoke(app, ["postprocess", str(vectors), str(tmp_path / "p2")])
    assert nothing.exit_code == 2 and "choose at least one" in nothing.output  # a usage error


def test_distill_applies_postprocessing(roberta_dir, corpus_file, vocab_file):
    raw = distill(corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), layers="1"))
    centered = distill(
        corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), layers="1", remove_top_pcs=1)
    )
    np.testing.assert_allclose(
        centered.vectors, PostProcessing(remove_top_pcs=1).apply(raw.vectors), atol=1e-5
    )
    assert centered.meta["postprocessing"][0]["remove_top_pcs"] == 1


def test_sweep_cautions_on_thin_coverage_and_never_names_nan_a_best(
    roberta_dir, corpus_file, vocab_file, tmp_path
):
    thin = tmp_path / "thin.tsv"
    thin.write_text("cat\tdog\t8\ncat\tgarden\t2\nparis\tgarden\t6\nqqq\trrr\t3\n")
    uncovered = tmp_path / "none.tsv"
    uncovered.write_text("qqq\trrr\t1\nsss\tttt\t2\n")
    inputs = [str(corpus_file), "--vocab", str(vocab_file), "--model", str(roberta_dir), "-q"]
    datasets = ["--dataset", str(thin), "--dataset", str(uncovered)]
    result = CliRunner().invoke(app, ["sweep", *inputs, "--out", str(tmp_path / "s"), *datasets])
    assert result.exit_code == 0, result.output
    assert "warning: thin.tsv: scores on 3 of 4 pairs (75.0%) mean little" in result.output
    assert "warning: none.tsv: none of its 2 pairs is covered; no score" in result.output
    assert "best on none.tsv: none, no pairs covered (0 of 2)" in result.output
    best = next(line for line in result.output.splitlines() if line.startswith("best on thin"))
    assert best.endswith("3 of 4 pairs)")
    assert "nan" not in result.output.lower()


def test_sweep_table_keeps_each_label_on_one_line_at_80_columns(
    roberta_dir, corpus_file, vocab_file, tmp_path
):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t8\ncat\tgarden\t2\nparis\tgarden\t6\ndog\tgarden\t3\n")
    inputs = [str(corpus_file), "--vocab", str(vocab_file), "--model", str(roberta_dir), "-q"]
    datasets = ["--dataset", str(pairs), "--dataset", "simlex999"]
    result = CliRunner().invoke(
        app, ["sweep", *inputs, "--out", str(tmp_path / "s"), *datasets], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    tables = [line for line in result.output.splitlines() if set(line) & set("┃│━─")]
    assert max(len(line) for line in tables) <= 80
    assert "…" not in result.output  # no header or label cut short
    labels = [line.split("│")[1].strip() for line in rows]
    one_table = list(dict.fromkeys(c.label for c in candidates(2)))
    assert labels == one_table * (len(labels) // len(one_table)), result.output


def test_a_dataset_with_no_covered_pair_has_empty_score_cells_never_nan(tmp_path):
    import csv

    from roberta_static.quality.evaluate import PairScores
    from roberta_static.quality.sweep import Candidate, SweepResult, write_csv

    none = PairScores("w", pairs=353, covered=0, spearman=float("nan"), pearson=float("nan"))
    some = PairScores("s", pairs=999, covered=60, spearman=0.5, pearson=0.25)
    result = SweepResult(Candidate((1,), "mean"), "none", 0.5, {"w": none, "s": some})
    write_csv([result], tmp_path / "sweep.csv")
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [(r["spearman"], r["pearson"]) for r in rows] == [("", ""), ("0.50", "0.25")]


def _results(layers: tuple[int, ...]) -> list[SweepResult]:
    scores = {"s": PairScores("s", pairs=4, covered=3, spearman=50.0, pearson=25.0)}
    return [
        SweepResult(Candidate((layer,)), processing, 0.5, scores)
        for layer in layers
        for processing in ("none", "center")
    ]


def test_write_sweep_writes_the_folder_whole_and_replaces_only_a_sweep(tmp_path):
    out = tmp_path / "sweep"
    assert write_sweep(_results((0, 1)), out) == (out / "sweep.csv", out / "sweep.png")
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep.png"]
    assert len(list(csv.DictReader((out / "sweep.csv").open()))) == 4
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(OutputError, match="pass --overwrite"):
        write_sweep(_results((0,)), out)
    write_sweep(_results((0,)), out, overwrite=True)
    assert len(list(csv.DictReader((out / "sweep.csv").open()))) == 2
    mine = user_folder(tmp_path / "mine")
    before = snapshot(tmp_path)
    with pytest.raises(OutputError, match="which roberta-static did not write"):
        write_sweep(_results((0,)), mine, overwrite=True)
    assert snapshot(tmp_path) == before


def test_check_sweep_folder_refuses_before_the_pass_what_write_sweep_would(tmp_path):
    out = tmp_path / "sweep"
    check_sweep_folder(out)
    write_sweep(_results((0,)), out)
    with pytest.raises(OutputError, match="pass --overwrite"):
        check_sweep_folder(out)
    check_sweep_folder(out, overwrite=True)
    with pytest.raises(OutputError, match="which roberta-static did not write"):
        check_sweep_folder(user_folder(tmp_path / "mine"), overwrite=True)
