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
from ..errors import MissingExtraError, OutputError, install_hint, short_list
from ..readable import DEFAULT, number, rows, steps_text, value_text
from .evaluate import MIN_COVERAGE, MIN_COVERED
from .model_match import ALLOW_FLAG
from .report import ReportData

TEMPLATE = "report.html.j2"
GENERATOR = "roberta-static report"
"""The page's generator mark: ``--overwrite`` replaces only a file that carries it."""
LABELLED = 25
"""Points named on the map: the most frequent entries, and the words whose neighbours are listed."""
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_STATS_SKIPPED = ("entries_not_found", "entries_not_encoded", "fill")  # shown in their sections
_MARGIN = {"t": 20, "b": 40, "l": 60, "r": 20}
_WHOLE_LAYERS = {"tickmode": "linear", "tick0": 0, "dtick": 1}  # no tick between two layers


def render(data: ReportData) -> str:
    """The page's HTML."""
    require_page_extra()
    import jinja2
    from plotly.offline import get_plotlyjs

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("roberta_static.quality", "templates"),
        autoescape=jinja2.select_autoescape(default=True),
        undefined=jinja2.StrictUndefined,
    )
    environment.globals.update(
        number=number, value_text=value_text, steps_text=steps_text, layers_text=_layers_text
    )
    stats = data.meta.get("stats") or {}
    return environment.get_template(TEMPLATE).render(
        data=data,
        generator=GENERATOR,
        title=Path(data.folder).name or data.folder,
        corpus=_corpus_text(data.meta.get("corpus") or []),
        options=rows(data.meta.get("config") or {}, DEFAULT),
        default=DEFAULT,
        stats=rows({k: v for k, v in stats.items() if k not in _STATS_SKIPPED}, "not recorded"),
        fill=stats.get("fill") or _fill_record(data),
        seen=int((data.counts > 0).sum()),
        labelled=LABELLED,
        allow_flag=ALLOW_FLAG,
        plotly_js=get_plotlyjs(),  # once, in the head: figures may come in any order
        histogram=_figure(_histogram(data.counts)),
        map=_figure(_map(data)),
        sweep=_figure(_sweep_plot(data.sweep)) if data.sweep else None,
        layers=_figure(_layer_plot(data.layer_view)) if data.layer_view else None,
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
    """``out`` as a path the page may be written to, unless it exists and is not replaceable.

    An existing file is replaced only with ``overwrite``, and only when it is an earlier report.

    Raises:
        OutputError: ``out`` is a folder, exists without ``overwrite``, exists and is not a
            report, or has no parent folder.

    """
    out = Path(out)
    if out.is_dir():
        raise OutputError(f"{out}: is a folder; give a file name such as report.html")
    if out.exists() and not overwrite:
        raise OutputError(f"{out}: exists; pass --overwrite to replace it")
    if out.exists() and not _is_report(out):
        raise OutputError(
            f"{out}: exists and is not a roberta-static report; --overwrite replaces only an "
            "earlier report: choose another file name"
        )
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


def _is_report(path: Path) -> bool:
    """Whether ``path`` starts as a page of ours does (its head names the generator)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'<meta name="generator" content="{GENERATOR}">'.encode() in head


def _layers_text(layers: list[int]) -> str:
    """``layers 0-6`` for a run of layers, else ``layers 2, 4``."""
    run = len(layers) > 2 and layers == list(range(layers[0], layers[-1] + 1))
    shown = f"{layers[0]}-{layers[-1]}" if run else ", ".join(map(str, layers))
    return f"layer{'s' if len(layers) > 1 else ''} {shown}"


def _corpus_text(corpus: list[dict[str, Any]]) -> str:
    """``wiki.txt (217.7 kB)``; several files: the first three, how many more, their total size."""
    if not corpus:
        return ""
    size = sum(item.get("bytes") or 0 for item in corpus)
    return f"{short_list([item.get('path') for item in corpus], 3)} ({value_text('bytes', size)})"


def map_labels(data: ReportData, limit: int = LABELLED) -> list[str]:
    """The name beside each point of the map, '' for none.

    The ``limit`` most frequent entries are named, and the words whose neighbours the page lists.
    """
    points = data.map
    seen = np.flatnonzero(points.counts > 0)
    frequent = seen[np.argsort(-points.counts[seen], kind="stable")][:limit]
    named = {points.words[i] for i in frequent} | {item.word for item in data.neighbours}
    return [word if word in named else "" for word in points.words]


def _fill_record(data: ReportData) -> dict[str, Any]:
    """What a folder from before fill records were kept says about its filled entries."""
    method = data.meta.get("config", {}).get("fill_unseen", "none")
    return {"method": method} if data.filled else {}


def _figure(figure: Any) -> str:
    """A figure as an HTML fragment; plotly.js itself is in the page's head, once."""
    return figure.to_html(full_html=False, include_plotlyjs=False, config=_PLOT_CONFIG)


def _histogram(counts: np.ndarray) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure(go.Histogram(x=counts[counts > 0], nbinsx=60, marker_color="#4c78a8"))
    figure.update_layout(
        xaxis_title="contexts averaged into an entry",
        yaxis_title="entries",
        yaxis={"type": "log", "dtick": 1},  # 1, 10, 100: no crowded labels between them
        height=320,
        margin=_MARGIN,
    )
    return figure


def _map(data: ReportData) -> Any:
    import plotly.graph_objects as go

    points = data.map
    labels = np.array(map_labels(data), dtype=object)
    words = np.array(points.words, dtype=object)
    figure = go.Figure()
    for name, chosen, color in (
        ("seen in the corpus", points.counts > 0, "#4c78a8"),
        ("filled (never seen)", points.counts == 0, "#e45756"),
    ):
        if not chosen.any():
            continue
        figure.add_trace(
            go.Scatter(
                x=points.xy[chosen, 0],
                y=points.xy[chosen, 1],
                mode="markers+text",
                name=name,
                text=labels[chosen].tolist(),
                textposition="top center",
                textfont={"size": 11, "color": "#333"},
                hovertext=words[chosen].tolist(),
                customdata=points.counts[chosen],
                hovertemplate="%{hovertext} (%{customdata:,} contexts)<extra></extra>",
                marker={"size": 6, "color": color, "opacity": 0.7},
            )
        )
    figure.update_layout(
        xaxis_title=f"{points.method.upper()} 1",
        yaxis_title=f"{points.method.upper()} 2",
        height=560,
        margin=_MARGIN,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
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
        xaxis=_WHOLE_LAYERS,
        xaxis_title="layer (0 = embeddings)",
        yaxis_title="Spearman x 100",
        height=420,
        margin=_MARGIN,
    )
    return figure


def _layer_plot(view: Any) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure(
        go.Scatter(x=list(range(len(view.cosines))), y=view.cosines, mode="lines+markers")
    )
    figure.update_layout(
        xaxis=_WHOLE_LAYERS,
        xaxis_title="layer (0 = embeddings)",
        yaxis_title=f"cosine with the static vector of {view.word}",
        height=360,
        margin=_MARGIN,
    )
    return figure
