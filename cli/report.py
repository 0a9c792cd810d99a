"""The `report` command: one self-contained HTML page about a vectors folder."""

from __future__ import annotations

from pathlib import Path

import typer

from ._util import Arg, Flag, Opt, one_line_errors


# fmt: off
def report_command(
    vectors: Path = Arg(..., help="A vectors folder written by distill", show_default=False),
    out: Path = Opt(..., "--out", "-o", help="The HTML file to write", show_default=False),
    words: str | None = Opt(None, "--words", help="Comma-separated words whose neighbours to list (default: a spread of frequent, rare and filled entries)"),
    dataset: list[str] = Opt([], "--dataset", "-d", help="Also score on a word-pair dataset: simlex999, wordsim353 or a word1<TAB>word2<TAB>score file; repeat for several"),
    sweep: Path | None = Opt(None, "--sweep", help="Folder written by sweep (default: VECTORS, when sweep wrote there)"),
    overwrite: bool = Flag("--overwrite", help="Replace an existing report file"),
) -> None:
    # fmt: on
    """Write an HTML report: provenance, coverage, filled entries, neighbours, a 2-D map, scores."""
    with one_line_errors():
        from roberta_static.report import gather
        from roberta_static.report_page import write_report

        chosen = [w.strip() for w in words.split(",") if w.strip()] if words else None
        data = gather(vectors, chosen, dataset, sweep)
        typer.echo(f"wrote {write_report(data, out, overwrite)}")
