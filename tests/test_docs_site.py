"""The documentation site: its Python code blocks run as written, it builds, a browser renders it.

Each page's Python blocks run in order, in one namespace, in a folder holding the files they name
(the page's ``SETUP``); a block that cannot run here says why in ``NOT_RUN``. The site is built
with ``mkdocs build --strict`` (CI builds it once and names the folder in ``ROBERTA_STATIC_SITE``)
and opened in the system Chromium.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from docs_examples import DOCS, ROOT, code_blocks, example_vectors, example_words

from roberta_static import StaticVectors

CHROMIUM = Path("/usr/bin/chromium")
# Blocks that do not run here, by page and the start of their code, and why.
NOT_RUN = {
    ("docs/tasks/finetune.md", "from roberta_static.finetune.run"): (
        "fine-tunes roberta-base from the hub; tests/test_finetune.py runs finetune() offline"
    ),
    ("docs/tasks/parallel.md", "from roberta_static import DistillConfig, distill\n\n\ndef main"): (
        "a script's main guard; tests/test_workers.py runs such scripts with workers"
    ),
}
PYTHON_CORPUS = [
    "Children play in the park while the king walks through Paris.",
    "The king and the woman met a man in New York, a city of cats and dogs.",
    "A woman and a man walked with the cat and the dog in Paris.",
    "New York is a city; Paris is a city too, and children live in both.",
    "The king, the man and the woman saw the dog chase the cat.",
]
PYTHON_VOCAB = ["children", "king", "woman", "man", "paris", "new york", "city", "cat", "dog"]


def _gensim_page(folder: Path, roberta_dir: Path | None) -> None:
    example_vectors(folder / "vectors", ("kv", "word2vec", "word2vec-bin"))


def _spacy_page(folder: Path, roberta_dir: Path | None) -> None:
    example_vectors(folder / "out" / "example")


def _static_encoders_page(folder: Path, roberta_dir: Path | None) -> None:
    pytest.importorskip("model2vec")
    pytest.importorskip("sentence_transformers")
    words = example_words(("cat", "sat"))
    example_vectors(folder / "vectors", ("model2vec", "sentence-transformers"), words)


def _python_page(folder: Path, roberta_dir: Path | None) -> None:
    shutil.copytree(roberta_dir, folder / "path" / "to" / "model")
    (folder / "corpus.txt").write_text("\n".join(PYTHON_CORPUS) + "\n")
    (folder / "vocab.txt").write_text("\n".join(PYTHON_VOCAB) + "\n")


SETUP = {
    "docs/usage/gensim.md": _gensim_page,
    "docs/usage/spacy.md": _spacy_page,
    "docs/usage/static-encoders.md": _static_encoders_page,
    "docs/usage/python.md": _python_page,
}


def site_python_blocks() -> dict[str, list[str]]:
    """Each page's Python blocks that run here, in order."""
    pages: dict[str, list[str]] = {}
    for path in sorted(DOCS.rglob("*.md")):
        for block in code_blocks(path):
            if block.language == "python" and not _not_run(block.page, block.code):
                pages.setdefault(block.page, []).append(block.code)
    return pages


def _not_run(page: str, code: str) -> bool:
    return any(page == p and code.startswith(start) for p, start in NOT_RUN)


def test_every_python_block_of_the_site_runs_or_says_why_not():
    assert set(site_python_blocks()) == set(SETUP)
    listed = {(page, start) for page, start in NOT_RUN}
    found = {
        (block.page, start)
        for path in DOCS.rglob("*.md")
        for block in code_blocks(path)
        for page, start in listed
        if block.page == page and block.code.startswith(start)
    }
    assert found == listed  # no reason left for a block that is gone


def run_page(page: str, folder: Path, monkeypatch, roberta_dir: Path | None = None) -> dict:
    """Run a page's Python blocks in ``folder``, prepared by its setup; the namespace after."""
    SETUP[page](folder, roberta_dir)
    monkeypatch.chdir(folder)
    namespace: dict = {"__name__": "docs_example"}
    for code in site_python_blocks()[page]:
        exec(code, namespace)
    return namespace


def test_gensim_page_reads_the_real_counts(tmp_path, monkeypatch):
    namespace = run_page("docs/usage/gensim.md", tmp_path, monkeypatch)
    words = example_words()
    assert namespace["kv"].get_vecattr("state", "count") == words.index("state") * 3 + 1


def test_spacy_page_keeps_the_vectors_through_queries_save_and_load(tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # spaCy's W008: similarity of a doc without vectors
        namespace = run_page("docs/usage/spacy.md", tmp_path, monkeypatch)
    nlp = namespace["nlp"]  # reloaded from pipeline/, after a most_similar query
    assert "roberta_static" in nlp.pipe_names
    vectors = StaticVectors.load(tmp_path / "out" / "example")
    for word in vectors.words:
        np.testing.assert_array_equal(nlp.vocab.vectors[word], vectors[word], err_msg=word)


def test_spacy_page_training_config_loads_the_vectors(tmp_path, monkeypatch):
    import spacy
    from thinc.api import Config

    (block,) = [b for b in code_blocks(DOCS / "usage" / "spacy.md") if b.language == "ini"]
    vectors = example_vectors(tmp_path / "out" / "example")
    monkeypatch.chdir(tmp_path)
    config = Config().from_str(block.code)
    for name in ("tok2vec", "ner"):  # the rest of a config, as spacy init fill-config makes it
        config["components"][name] = {"factory": name}
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    before_init = spacy.util.registry.resolve({"x": config["initialize"]["before_init"]})["x"]
    nlp = before_init(nlp)
    assert nlp.pipe_names == ["roberta_static", "tok2vec", "ner"]
    np.testing.assert_array_equal(nlp.vocab.vectors["war"], vectors["war"])


def test_static_encoders_page_encodes_with_the_exported_vectors(tmp_path, monkeypatch):
    namespace = run_page("docs/usage/static-encoders.md", tmp_path, monkeypatch)
    embedding = np.asarray(namespace["model"].encode(["A cat sat."]))
    assert embedding.shape == (1, 16) and np.abs(embedding).sum() > 0


def test_python_page_distills_queries_and_writes(tmp_path, roberta_dir, monkeypatch):
    namespace = run_page("docs/usage/python.md", tmp_path, monkeypatch, roberta_dir)
    vecs = namespace["vecs"]
    assert set(vecs.words) == set(PYTHON_VOCAB)
    for written in ("vectors/vectors.npy", "out/vectors.kv", "sweep/sweep.csv", "pipeline"):
        assert (tmp_path / written).exists(), written


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site: CI's (``ROBERTA_STATIC_SITE``), else built here as CI builds it."""
    if os.environ.get("ROBERTA_STATIC_SITE"):
        return Path(os.environ["ROBERTA_STATIC_SITE"])
    pytest.importorskip("mkdocs", reason="needs the docs extra")
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", out]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def test_the_site_holds_every_page_and_the_generated_references(site):
    for path in DOCS.rglob("*.md"):
        page = path.relative_to(DOCS)
        folder = page.parent if page.stem == "index" else page.with_suffix("")
        assert (site / folder / "index.html").exists(), page
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    commands = re.findall(r'id="roberta-static-([\w-]+)"', cli)
    from roberta_static.cli import COMMANDS

    assert set(commands) == set(COMMANDS)
    assert "--max-contexts" in cli
    api = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    assert 'id="roberta_static.api.distill"' in api
    headings = [" ".join(h.split()) for h in re.findall(r"<h3 [^>]*>(.*?)<a ", api, re.S)]
    assert "roberta_static.spacy_plugin.init.write_pipeline" in headings  # as users import it


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(site):
    """The site over HTTP on the loopback interface, as ``mkdocs serve`` would show it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs a system Chromium (apt-get install chromium)"
)
def test_the_home_page_and_the_command_line_reference_render_in_a_browser(served):
    sync_api = pytest.importorskip("playwright.sync_api")
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
        page.goto(f"{served}/")
        home_title = page.title()
        home_heading = page.locator("article h1").inner_text()
        nav = page.locator("nav.md-nav--primary").inner_text()
        page.goto(f"{served}/reference/cli/")
        distill = page.locator("#roberta-static-distill")
        distill.scroll_into_view_if_needed()
        visible = distill.is_visible()
        options = page.locator("article").inner_text()
        browser.close()
    assert errors == []
    assert home_title.startswith("roberta-static") and home_heading.startswith("roberta-static")
    assert "Getting started" in nav and "Command line" in nav
    assert visible and "--max-contexts" in options and "--resume" in options
    assert [url for url in requests if not url.startswith(served)] == []
