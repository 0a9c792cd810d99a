"""The `report` command: one self-contained HTML page about a vectors folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._util import Flag, Opt, command_line_checks, one_line_errors
from .options import TRUST_REMOTE_CODE, VECTORS_IN
from .quality import warn_coverage

if TYPE_CHECKING:
    from roberta_static.vectors.static import StaticVectors


# fmt: off
def report_command(
    vectors: Path = VECTORS_IN,
    out: Path = Opt(..., "--out", "-o", help="The HTML file to write", show_default=False),
    words: str | None = Opt(None, "--words", help="Comma-separated words whose neighbours to list; those without a vector are left out with a warning (default: a spread of frequent, rare and filled entries)"),
    dataset: list[str] = Opt([], "--dataset", "-d", help="Also score on a word-pair dataset: simlex999, wordsim353 or a word1<TAB>word2<TAB>score file; repeat for several"),
    sweep: Path | None = Opt(None, "--sweep", help="Folder written by sweep (default: VECTORS, when sweep wrote there)"),
    sentence: str | None = Opt(None, "--sentence", help="Layer view: a sentence holding --word (needs --model)"),
    word: str | None = Opt(None, "--word", help="Layer view: the word to follow through the layers"),
    model: str | None = Opt(None, "--model", "-m", help="Layer view: the model the vectors were distilled with (checked against their meta.json)"),
    allow_other_model: bool = Flag("--allow-other-model", help="Layer view: use --model even if it is not the model the vectors were distilled with; the page says so"),
    overwrite: bool = Flag("--overwrite", help="Replace an earlier report at --out (never another file)"),
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    allow_pickle: bool = Flag("--allow-pickle", help="Load pickles you trust: a .kv VECTORS file, or the layer view model's .bin weights when it has no safetensors file"),
) -> None:
    # fmt: on
    """Write an HTML report: neighbours, a 2-D map, scores, layer view, coverage, filled entries, provenance."""
    with one_line_errors():
        from roberta_static.errors import ConfigError
        from roberta_static.quality.layer_view import load_layer_view
        from roberta_static.quality.page import check_report_file, require_page_extra, write_report
        from roberta_static.quality.report import gather

        given = [name for name, value in (("--sentence", sentence), ("--word", word), ("--model", model)) if value]
        if given and len(given) < 3:
            with command_line_checks():
                raise ConfigError(f"the layer view needs --sentence, --word and --model; got only {', '.join(given)}")
        # Every input is checked before the slow parts: the map (UMAP), the model, the page (plotly).
        check_report_file(out, overwrite)
        require_page_extra()
        static = _layer_view_vectors(vectors, sentence, word, model, allow_other_model, allow_pickle) if given else None
        chosen = [w.strip() for w in words.split(",") if w.strip()] if words else None
        data = gather(vectors, chosen, dataset, sweep, allow_pickle=allow_pickle)
        for unknown in data.words_without_vectors:
            typer.echo(f"warning: --words: {unknown!r} has no vector; left out", err=True)
        if static is not None:
            from roberta_static.model.loading import quiet_transformers

            quiet_transformers()
            data.layer_view = load_layer_view(
                model, static, sentence, word, allow_other_model=allow_other_model,
                trust_remote_code=trust_remote_code, allow_pickle=allow_pickle,
            )  # fmt: skip
        typer.echo(f"wrote {write_report(data, out, overwrite)}")
        for scores in data.scores:
            warn_coverage(scores.dataset, scores.covered, scores.pairs, "pairs")


def _layer_view_vectors(
    vectors: Path, sentence: str, word: str, model: str, allow_other_model: bool, allow_pickle: bool
) -> StaticVectors:
    """The vectors, once the layer view's checks that need no model pass (a warning if doubtful)."""
    from roberta_static.quality.layer_view import locate_word
    from roberta_static.quality.model_match import check_model
    from roberta_static.vectors.static import StaticVectors

    static = StaticVectors.load(vectors, allow_pickle=allow_pickle)
    locate_word(static, sentence, word, str(vectors))
    match = check_model(static.meta.get("model") or {}, model, allow_other_model)
    if match.verdict in ("other", "unrecorded"):
        typer.echo(f"warning: --model: {match}", err=True)
    return static
