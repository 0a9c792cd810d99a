"""The HTML report: every section, no external reference, one-line errors; a browser opens it."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.cli import app
from roberta_static.quality.page import LABELLED
from roberta_static.quality.report import MAP_POINTS, default_words, gather, map_rows, pca_2d
from roberta_static.quality.sweep import CSV_FILE, CSV_HEADER
from roberta_static.readable import duration

runner = CliRunner()
CHROMIUM = Path("/usr/bin/chromium")
SECTIONS = ("provenance", "coverage", "filled", "neighbours", "map")


@pytest.fixture(scope="module")
def vectors_dir(roberta_dir, tmp_path_factory):
    from conftest import CORPUS_LINES

    folder = tmp_path_factory.mktemp("report")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES) + "\n")
    words = sorted({w.strip(".,;").lower() for line in CORPUS_LINES for w in line.split()})
    config = DistillConfig(model=str(roberta_dir), layers="1-2", fill_unseen="mapped")
    distill(corpus, [*words, "zebra", "quantum"], config).save(folder / "vectors")
    return folder / "vectors"


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def external_references(html: str) -> list[str]:
    """src/href attributes of the page's markup that point off the page.

    Inline scripts are left out: plotly.js carries attribution links for map tiles as strings in
    its code (the browser test checks that no request leaves the page).
    """
    html = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", html, flags=re.S | re.I)
    return re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//[^"' >]*""", html, re.I)


def test_report_holds_every_section_and_no_external_reference(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    result = run("report", vectors_dir, "--out", out, "--words", "cat,zebra", "-d", "simlex999")
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    for section in (*SECTIONS, "evaluation"):
        assert f'<section id="{section}">' in html, section
    assert 'id="sweep"' not in html and 'id="layers"' not in html
    assert external_references(html) == []
    assert html.count("plotly.js v") == 1  # the library once, inline; figures share it
    assert "held-out" in html.lower() and "mapped" in html
    options = html.split("<summary>Options (")[1].split("</details>")[0]
    assert "not set (default)" in options  # e.g. max_length
    neighbours = html.split('<section id="neighbours">')[1].split("</section>")[0]
    assert "cat <span" in neighbours and "zebra <span" in neighbours
    assert "simlex999" in html.split('<section id="evaluation">')[1]


def test_what_a_user_came_for_comes_first_and_the_options_are_folded(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    assert run("report", vectors_dir, "--out", out, "-d", "simlex999").exit_code == 0
    html = out.read_text(encoding="utf-8")
    order = [html.index(f'<section id="{name}">') for name in
             ("neighbours", "map", "evaluation", "coverage", "filled", "provenance")]  # fmt: skip
    assert order == sorted(order)
    # Before the neighbours: the title, a summary of a few lines and the links to the sections.
    head = html.split('<section id="neighbours">')[0]
    head = re.sub(r"<(style|script)\b.*?</\1>", "", head, flags=re.S)  # plotly.js is in the head
    assert "<table" not in head and len(re.sub(r"<[^>]+>|\s+", " ", head)) < 600
    assert "from <strong>" + str(StaticVectors.load(vectors_dir).meta["model"]["name"]) in head
    provenance = section(html, "provenance")
    for summary in ("Options (", "Run statistics ("):
        folded = provenance.split(f"<details>\n<summary>{summary}")
        assert len(folded) == 2 and "</table>\n</details>" in folded[1], summary


def test_the_page_shows_values_in_words_and_units_not_python_reprs(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    assert run("report", vectors_dir, "--out", out).exit_code == 0
    html = re.sub(r"<script\b.*?</script>", "", out.read_text(), flags=re.S)  # plotly's own data
    tables = section(html, "provenance") + section(html, "coverage") + section(html, "filled")
    text = re.sub(r"<[^>]+>", " ", tables)
    assert re.findall(r"None|True|False|[{}\[\]]|'\w+'", text) == []
    measured = re.findall(r"\d[\d,]*\.\d+(?! [kMG]B)", text)  # sizes keep one decimal: 217.7 kB
    assert [m for m in measured if len(m.replace(",", "").replace(".", "").lstrip("0")) > 3] == []
    stats = StaticVectors.load(vectors_dir).meta["stats"]
    wait = f'<th>encoder wait</th><td class="num">{duration(stats["encoder_wait_seconds"])}</td>'
    assert (
        wait in html
        and "<th>time</th>" in html
        and '<th>stopped early</th><td class="num">no<' in html
    )
    assert "<th>vocabulary</th>" in html and "duplicates 0" in html


def test_the_map_names_the_most_frequent_entries_and_the_listed_words():
    from roberta_static.quality.page import map_labels
    from roberta_static.quality.report import Map, Neighbours, ReportData

    counts = np.array([5, 0, 9, 1, 7, 2])
    words = ["five", "filled", "nine", "one", "seven", "two"]
    data = ReportData("v", {}, 6, 2, counts, ["filled"], [Neighbours("one", 1, [])],
                      Map("pca", words, np.zeros((6, 2)), counts))  # fmt: skip
    assert map_labels(data, limit=2) == ["", "", "nine", "one", "seven", ""]


def test_the_layer_axes_show_whole_layers(vectors_dir, roberta_dir, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with open(sweep / CSV_FILE, "w", newline="") as handle:
        csv.writer(handle).writerows(
            [CSV_HEADER, *([f"layer {i}", i, "none", "0.1", "simlex999", 40 + i, 1.0, 9, 10]
                           for i in range(3))]
        )  # fmt: skip
    out = tmp_path / "report.html"
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", roberta_dir)
    assert run("report", vectors_dir, "--out", out, "--sweep", sweep, *view).exit_code == 0
    html = out.read_text()
    for name in ("layers", "sweep"):  # a tick at every layer, none between two
        assert '"xaxis":{"tickmode":"linear","tick0":0,"dtick":1,' in section(html, name), name


def test_external_reference_check_can_fail():
    assert external_references('<img src="https://cdn.plot.ly/x.png">') != []
    assert external_references('<script src="https://cdn.plot.ly/x.js"></script>') != []
    assert external_references("<a href='//example.org'>x</a>") != []


def test_sweep_results_are_shown_when_the_folder_holds_them(vectors_dir, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with open(sweep / CSV_FILE, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_HEADER)
        for layer, rho in ((0, 40.5), (1, 47.25)):
            writer.writerow([f"layer {layer}", layer, "none", "0.1", "simlex999", rho, 1.0, 9, 10])
    out = tmp_path / "report.html"
    assert run("report", vectors_dir, "--out", out, "--sweep", sweep).exit_code == 0
    section = out.read_text().split('<section id="sweep">')[1]
    assert "47.25" in section and "layer 1" in section


def test_bad_input_is_one_line_and_writes_nothing(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    missing = run("report", tmp_path / "nope", "--out", out)
    assert missing.exit_code == 1 and "nope: no such vectors folder or file" in missing.output
    unknown = run("report", vectors_dir, "--out", out, "--words", "unicorn,pegasus")
    assert unknown.exit_code == 1
    assert "--words: no vector for any word given: unicorn, pegasus" in unknown.output
    no_sweep = run("report", vectors_dir, "--out", out, "--sweep", tmp_path)
    assert no_sweep.exit_code == 1 and "no sweep.csv" in no_sweep.output
    assert not out.exists() and list(tmp_path.iterdir()) == []
    out.write_text("mine")
    again = run("report", vectors_dir, "--out", out)
    assert again.exit_code == 1 and "pass --overwrite" in again.output
    assert out.read_text() == "mine"
    not_ours = run("report", vectors_dir, "--out", out, "--overwrite")
    assert not_ours.exit_code == 1 and "is not a roberta-static report" in not_ours.output
    assert out.read_text() == "mine"
    out.unlink()
    assert run("report", vectors_dir, "--out", out).exit_code == 0
    out.write_text(out.read_text().replace("</body>", "<p>edited</p></body>"))
    assert run("report", vectors_dir, "--out", out, "--overwrite").exit_code == 0
    assert "edited" not in out.read_text()


def test_an_entry_named_twice_is_listed_once(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    assert run("report", vectors_dir, "--out", out, "--words", "cat,Cat,dog").exit_code == 0
    neighbours = out.read_text().split('<section id="neighbours">')[1].split("</section>")[0]
    assert neighbours.count("cat <span") == 1 and neighbours.count("dog <span") == 1


def test_scores_over_too_few_pairs_show_a_dash_and_a_warning(vectors_dir, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("cat\tdog\t7.5\ncat\tunicorn\t1.0\n")
    out = tmp_path / "report.html"
    result = run("report", vectors_dir, "--out", out, "-d", pairs)
    assert result.exit_code == 0, result.output
    assert "warning: pairs.txt: scores on 1 of 2 pairs (50.0%) mean little" in result.output
    evaluation = out.read_text().split('<section id="evaluation">')[1].split("</section>")[0]
    assert "nan" not in evaluation.lower() and "(low coverage)" in evaluation
    assert evaluation.count('<td class="num">-</td>') == 2  # Spearman and Pearson over 1 pair


def test_the_layer_view_refuses_post_processed_vectors_before_loading_the_model(
    vectors_dir, tmp_path
):
    from roberta_static.vectors.postprocess import PostProcessing, postprocess

    moved = tmp_path / "centered"
    postprocess(StaticVectors.load(vectors_dir), PostProcessing(center=True)).save(moved)
    out = tmp_path / "report.html"
    args = ("--sentence", "The cat sat.", "--word", "cat", "--model", tmp_path / "no-model")
    result = run("report", moved, "--out", out, *args)
    assert result.exit_code == 1, result.output
    assert f"error: {moved}: post-processed (center), so no longer in the model's space" in (
        result.output
    )
    assert not out.exists()


def test_default_words_spread_from_frequent_to_rare_and_filled():
    counts = np.array([9, 0, 1, 5, 3, 7, 2, 0, 4, 6, 8])
    vectors = StaticVectors([f"w{i}" for i in range(11)], np.eye(11), counts)
    top, middle, rare, filled = (
        ["w0", "w10", "w5"],
        ["w9", "w3", "w8"],
        ["w4", "w6", "w2"],
        ["w1", "w7"],
    )
    assert default_words(vectors) == [*top, *middle, *rare, *filled]


def test_map_keeps_filled_entries_and_the_most_frequent():
    counts = np.array([0, 5, 0, 9, 1, 7])
    assert map_rows(counts, limit=4).tolist() == [0, 2, 3, 5]


def test_pca_matches_the_top_components():
    x = np.random.default_rng(0).normal(size=(50, 6)) * [5, 3, 1, 1, 1, 1]
    xy = pca_2d(x)
    centered = x - x.mean(0)
    _, vectors = np.linalg.eigh(np.cov(centered.T))
    expected = centered @ vectors[:, ::-1][:, :2]
    np.testing.assert_allclose(np.abs(xy), np.abs(expected), atol=1e-8)


def test_gather_without_sweep_or_datasets(vectors_dir):
    data = gather(vectors_dir, umap=False)
    assert data.sweep is None and data.scores == []
    assert data.filled == ["zebra", "quantum"] and data.map.method == "pca"
    assert data.map.xy.shape == (data.entries, 2)


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs a system Chromium (apt-get install chromium)"
)
def test_report_opens_in_a_browser_without_errors_and_reads_well(
    vectors_dir, roberta_dir, tmp_path
):
    sync_api = pytest.importorskip("playwright.sync_api")
    # ROBERTA_STATIC_REPORT_VECTORS: another folder to open (README's screenshot uses real vectors).
    folder = Path(os.environ.get("ROBERTA_STATIC_REPORT_VECTORS") or vectors_dir)
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", roberta_dir)
    out = tmp_path / "report.html"
    assert (
        run("report", folder, "--out", out, *(view if folder == vectors_dir else ())).exit_code == 0
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(out.as_uri())
        page.wait_for_selector("#map .scatterlayer .point", timeout=20_000)
        points = page.locator("#map .scatterlayer .point").count()
        labels = page.locator("#map .scatterlayer .textpoint text").all_text_contents()
        hidden = page.evaluate("document.querySelectorAll('#coverage .bars .point').length")
        first = page.locator("#neighbours table").first.bounding_box()
        ticks = page.locator("#layers .xtick text").all_text_contents()
        if os.environ.get("ROBERTA_STATIC_REPORT_SCREENSHOT"):
            page.screenshot(path=os.environ["ROBERTA_STATIC_REPORT_SCREENSHOT"])  # the first screen
        browser.close()
    assert errors == []
    vectors = StaticVectors.load(folder)
    assert points == min(len(vectors), MAP_POINTS)
    frequent = [vectors.words[i] for i in np.argsort(-vectors.counts, kind="stable")[:LABELLED]]
    assert set(frequent) <= set(labels)  # the map names the most frequent entries
    assert first["y"] + first["height"] < 900  # the neighbours start on the first screen
    assert hidden > 0  # the histogram drew its bars
    if folder == vectors_dir:  # the layer view of two blocks: layers 0, 1, 2, nothing between
        assert ticks == ["0", "1", "2"]
    assert [url for url in requests if not url.startswith("file:")] == []


def test_layer_view_against_eager_attention_and_a_one_occurrence_distillation(
    roberta_dir, tmp_path
):
    import torch
    from transformers import AutoModel, AutoTokenizer

    sentence = "The dog chased the cat across the garden."
    corpus = tmp_path / "one.txt"
    corpus.write_text(sentence + "\n")
    # Distilled from layer 2 over this one sentence, the static vector of "cat" is its layer-2
    # contextual vector there: the view's cosine at layer 2 is 1.
    vectors = distill(corpus, ["cat", "dog"], DistillConfig(model=str(roberta_dir), layers="2"))
    vectors.save(tmp_path / "vectors")
    out = tmp_path / "report.html"
    args = ("--sentence", sentence, "--word", "Cat", "--model", roberta_dir)
    result = run("report", tmp_path / "vectors", "--out", out, *args)
    assert result.exit_code == 0, result.output
    assert '<section id="layers">' in out.read_text()

    from roberta_static.quality.layer_view import layer_view

    model = AutoModel.from_pretrained(roberta_dir, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(roberta_dir)
    view = layer_view(model, tokenizer, vectors, sentence, "cat")
    assert len(view.cosines) == 3 and view.cosines[2] == pytest.approx(1.0, abs=1e-4)
    encoded = tokenizer(sentence, return_tensors="pt", return_offsets_mapping=True)
    spans = encoded.pop("offset_mapping")[0].tolist()
    start = sentence.index("cat")
    rows = [i for i, (a, b) in enumerate(spans) if a < start + 3 and b > start and b > a]
    with torch.no_grad():
        attentions = model(**encoded, output_attentions=True).attentions
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    for layer, weights in enumerate(attentions):
        mean = weights[0].mean(0)[rows].mean(0)
        top = torch.topk(mean, 5)
        expected = [
            (tokens[i], round(float(w), 3)) for w, i in zip(top.values, top.indices, strict=True)
        ]
        assert [w for _, w in view.attention[layer]] == [w for _, w in expected]


def test_load_layer_view_loads_the_model_by_name_with_its_options(roberta_dir, tmp_path):
    import torch
    from transformers import AutoModel

    from roberta_static.errors import ConfigError, ModelLoadError
    from roberta_static.quality.layer_view import load_layer_view

    sentence = "The dog chased the cat across the garden."
    (tmp_path / "one.txt").write_text(sentence + "\n")
    vectors = distill(
        tmp_path / "one.txt", ["cat"], DistillConfig(model=str(roberta_dir), layers="2")
    )
    view = load_layer_view(str(roberta_dir), vectors, sentence, "Cat")
    assert view.word == "Cat" and len(view.cosines) == 3
    assert view.cosines[2] == pytest.approx(1.0, abs=1e-4)  # distilled from this one occurrence
    assert len(view.attention) == 2 and all(len(top) == 5 for top in view.attention)
    pickled = tmp_path / "pickled"  # the same model, its weights only in a pickle
    pickled.mkdir()
    for source in roberta_dir.iterdir():
        if source.name != "model.safetensors":
            (pickled / source.name).write_bytes(source.read_bytes())
    torch.save(AutoModel.from_pretrained(roberta_dir).state_dict(), pickled / "pytorch_model.bin")
    # The same weights in another file: its SHA-256 differs, so it counts as another model.
    with pytest.raises(ConfigError, match="not the model the vectors were distilled with"):
        load_layer_view(str(pickled), vectors, sentence, "cat")
    with pytest.raises(ModelLoadError, match="pass --allow-pickle"):
        load_layer_view(str(pickled), vectors, sentence, "cat", allow_other_model=True)
    again = load_layer_view(
        str(pickled), vectors, sentence, "cat", allow_other_model=True, allow_pickle=True
    )
    assert again.cosines == view.cosines and again.model.verdict == "other"
    assert view.model.verdict == "same"


def test_layer_view_needs_its_three_options_and_the_word_in_the_sentence(
    vectors_dir, roberta_dir, tmp_path
):
    out = tmp_path / "report.html"
    partial = run("report", vectors_dir, "--out", out, "--word", "cat")
    assert (
        partial.exit_code == 2  # a usage error
        and "needs --sentence, --word and --model; got only --word" in partial.output
    )
    absent = run(
        "report",
        vectors_dir,
        "--out",
        out,
        "--sentence",
        "A dog.",
        "--word",
        "cat",
        "--model",
        roberta_dir,
    )
    assert absent.exit_code == 1 and "--word: 'cat' does not occur in the sentence" in absent.output
    assert not out.exists()


def test_a_word_without_a_vector_is_warned_about_and_left_out(vectors_dir, tmp_path):
    out = tmp_path / "report.html"
    result = run("report", vectors_dir, "--out", out, "--words", "zebraquux,cat")
    assert result.exit_code == 0, result.output
    assert "warning: --words: 'zebraquux' has no vector; left out" in result.output
    page = out.read_text()
    neighbours = page.split('<section id="neighbours">')[1].split("</section>")[0]
    assert "cat <span" in neighbours and "without a vector: zebraquux" in neighbours


PROBE = """
import sys
from roberta_static.cli import app
try:
    app(sys.argv[1:], prog_name="roberta-static")
finally:
    print(sorted(m for m in ("torch", "transformers", "spacy", "plotly", "umap") if m in sys.modules))
"""


def test_every_bad_input_is_refused_before_torch_plotly_umap_or_spacy_load(
    vectors_dir, bert_dir, tmp_path
):
    import subprocess
    import sys

    from roberta_static.vectors.postprocess import PostProcessing, postprocess

    moved = tmp_path / "centered"
    postprocess(StaticVectors.load(vectors_dir), PostProcessing(center=True)).save(moved)
    mine = tmp_path / "mine.html"
    mine.write_text("mine")
    out = tmp_path / "report.html"
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", tmp_path / "no-model")
    cases = {
        "nope: no such vectors folder or file": [tmp_path / "nope", "-o", out],
        "pass --overwrite": [vectors_dir, "-o", mine],
        "no such folder": [vectors_dir, "-o", tmp_path / "no" / "r.html"],
        "--words: no vector for any word given: unicorn": [vectors_dir, "-o", out, "--words", "unicorn"],
        "nosuch.tsv: no such file": [vectors_dir, "-o", out, "-d", "nosuch.tsv"],
        "no sweep.csv": [vectors_dir, "-o", out, "--sweep", tmp_path],
        "needs --sentence, --word and --model": [vectors_dir, "-o", out, "--word", "cat"],
        "post-processed (center)": [moved, "-o", out, *view],
        "--word: 'dog' does not occur in the sentence": [vectors_dir, "-o", out, *view[:3], "dog", *view[4:]],
        "is not the model the vectors were distilled with": [vectors_dir, "-o", out, *view[:5], bert_dir],
    }  # fmt: skip
    for message, args in cases.items():
        result = subprocess.run(
            [sys.executable, "-c", PROBE, "report", *map(str, args)],
            capture_output=True,
            text=True,
            check=False,
        )
        usage = message.startswith("needs --sentence")  # the command line alone: status 2
        assert result.returncode == (2 if usage else 1), result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
        assert result.stdout.strip() == "[]", message
    assert not out.exists() and mine.read_text() == "mine"


def test_the_layer_view_refuses_another_model_in_one_line_naming_both(
    vectors_dir, roberta_dir, bert_dir, tmp_path
):
    # The case: vectors of one model, a layer view through another of the same width.
    out = tmp_path / "report.html"
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", bert_dir)
    result = run("report", vectors_dir, "--out", out, *view)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(
        f"error: --model: {bert_dir} is not the model the vectors were distilled with, "
        f"{roberta_dir} (other weights, SHA-256 "
    )
    assert "pass --allow-other-model to use this one anyway" in result.output
    assert not out.exists()


def test_another_model_allowed_is_warned_about_and_named_on_the_page(
    vectors_dir, roberta_dir, bert_dir, tmp_path
):
    out = tmp_path / "report.html"
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", bert_dir)
    result = run("report", vectors_dir, "--out", out, *view, "--allow-other-model")
    assert result.exit_code == 0, result.output
    assert f"warning: --model: {bert_dir}, not the model the vectors were distilled with " in (
        result.output
    )
    said = section(out.read_text(), "layers").split('<p id="layer-model" class="warning">')[1]
    said = said.split("</p>")[0]
    assert said.startswith(f"Model: {bert_dir}, not the model the vectors were distilled with ")
    assert f"({roberta_dir})" in said and "Used anyway (--allow-other-model)" in said


def test_the_page_names_the_layer_view_model_a_copy_of_the_weights_passes(
    vectors_dir, roberta_dir, tmp_path
):
    import shutil

    copy = shutil.copytree(roberta_dir, tmp_path / "copy")  # another path, the same weights
    out = tmp_path / "report.html"
    view = ("--sentence", "The cat sat.", "--word", "cat", "--model", copy)
    result = run("report", vectors_dir, "--out", out, *view)
    assert result.exit_code == 0 and result.output == f"wrote {out}\n", result.output
    said = section(out.read_text(), "layers").split('<p id="layer-model">')[1].split("</p>")[0]
    assert said.startswith(
        f"Model: {copy}, the model the vectors were distilled with (the same weights, SHA-256 "
    )


def section(html: str, name: str) -> str:
    """The markup of one ``<section>`` of the page."""
    return html.split(f'<section id="{name}">')[1].split("</section>")[0]
