"""The report as one self-contained HTML page: plotly figures inlined, laid out by jinja2.

Needs the ``[report]`` extra (plotly, jinja2). plotly.js is written into the page once, so the page
opens offline and makes no request.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_files
from ..errors import MissingExtraError, OutputError, install_hint
from .evaluate import MIN_COVERAGE, MIN_COVERED
from .report import ReportData

TEMPLATE = "report.html.j2"
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_STATS_SKIPPED = ("entries_not_found", "entries_not_encoded", "vocabulary", "fill")


def render(data: ReportData) -> str:
    """The page's HTML."""
    require_page_extra()
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("roberta_static.quality", "templates"),
        autoescape=jinja2.select_autoescape(default=True),
        undefined=jinja2.StrictUndefined,
    )
    figures = _Figures()
    stats = data.meta.get("stats", {})
    return environment.get_template(TEMPLATE).render(
        data=data,
        title=Path(data.folder).name or data.folder,
        stats={k: v for k, v in stats.items() if k not in _STATS_SKIPPED},
        fill=stats.get("fill") or _fill_record(data),
        seen=int((data.counts > 0).sum()),
        histogram=figures.add(_histogram(data.counts)),
        map=figures.add(_map(data)),
        sweep=figures.add(_sweep_plot(data.sweep)) if data.sweep else None,
        layers=figures.add(_layer_plot(data.layer_view)) if data.layer_view else None,
        min_covered=MIN_COVERED,
        min_coverage=f"{MIN_COVERAGE:.0f}",
    )


def require_page_extra() -> None:
    """Raise :class:`MissingExtraError` naming the extra when plotly or jinja2 is missing.

    Looks the packages up without importing them (plotly takes seconds), so a command can check
    before its slow work rather than fail at the end.
    """
    for package in ("jinja2", "plotly"):
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError(f"the report needs {package}: {install_hint('report')}")


def check_report_file(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """``out`` as a path the page may be written to: refused if it exists, unless ``overwrite``.

    Raises:
        OutputError: ``out`` is a folder, exists without ``overwrite``, or has no parent folder.

    """
    out = Path(out)
    if out.is_dir():
        raise OutputError(f"{out}: is a folder; give a file name such as report.html")
    if out.exists() and not overwrite:
        raise OutputError(f"{out}: exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise OutputError(f"{out.parent}: no such folder")
    return out


def write_report(data: ReportData, out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write the page to ``out`` (refused if it exists, unless ``overwrite``)."""
    out = check_report_file(out, overwrite)
    page = render(data)
    with atomic_files(out.parent) as staging:
        (staging / out.name).write_text(page, encoding="utf-8")
    return out


def _fill_record(data: ReportData) -> dict[str, Any]:
    """What a folder from before fill records were kept says about its filled entries."""
    method = data.meta.get("config", {}).get("fill_unseen", "none")
    return {"method": method} if data.filled else {}


class _Figures:
    """Each figure as an HTML fragment; plotly.js goes into the first one only."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, figure: Any) -> str:
        html = figure.to_html(
            full_html=False, include_plotlyjs=self.count == 0, config=_PLOT_CONFIG
        )
        self.count += 1
        return html


def _histogram(counts: np.ndarray) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure(go.Histogram(x=counts[counts > 0], nbinsx=60, marker_color="#4c78a8"))
    figure.update_layout(
        xaxis_title="contexts averaged into an entry",
        yaxis_title="entries",
        yaxis_type="log",
        height=320,
        margin={"t": 20, "b": 40, "l": 60, "r": 20},
    )
    return figure


def _map(data: ReportData) -> Any:
    import plotly.graph_objects as go

    points = data.map
    figure = go.Figure()
    for name, chosen, color in (
        ("seen in the corpus", points.counts > 0, "#4c78a8"),
        ("filled (never seen)", points.counts == 0, "#e45756"),
    ):
        if not chosen.any():
            continue
        words = [w for w, keep in zip(points.words, chosen, strict=True) if keep]
        figure.add_trace(
            go.Scatter(
                x=points.xy[chosen, 0],
                y=points.xy[chosen, 1],
                mode="markers",
                name=name,
                text=words,
                customdata=points.counts[chosen],
                hovertemplate="%{text} (%{customdata} contexts)<extra></extra>",
                marker={"size": 5, "color": color, "opacity": 0.7},
            )
        )
    figure.update_layout(
        xaxis_title=f"{points.method.upper()} 1",
        yaxis_title=f"{points.method.upper()} 2",
        height=600,
        margin={"t": 20, "b": 40, "l": 60, "r": 20},
    )
    return figure


def _sweep_plot(rows: list[dict[str, str]]) -> Any:
    import plotly.graph_objects as go

    singles = [r for r in rows if " " not in r["layers"]]
    figure = go.Figure()
    for key in dict.fromkeys((r["dataset"], r["postprocessing"]) for r in singles):
        line = [r for r in singles if (r["dataset"], r["postprocessing"]) == key]
        figure.add_trace(
            go.Scatter(
                x=[int(r["layers"]) for r in line],
                y=[float(r["spearman"]) if r["spearman"] else None for r in line],  # a gap
                mode="lines+markers",
                name=f"{key[0]} ({key[1]})",
                line={"dash": "solid" if key[1] == "none" else "dash"},
            )
        )
    figure.update_layout(
        xaxis_title="layer (0 = embeddings)",
        yaxis_title="Spearman x 100",
        height=420,
        margin={"t": 20, "b": 40, "l": 60, "r": 20},
    )
    return figure


def _layer_plot(view: Any) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure(
        go.Scatter(x=list(range(len(view.cosines))), y=view.cosines, mode="lines+markers")
    )
    figure.update_layout(
        xaxis_title="layer (0 = embeddings)",
        yaxis_title=f"cosine with the static vector of {view.word}",
        height=360,
        margin={"t": 20, "b": 40, "l": 60, "r": 20},
    )
    return figure
