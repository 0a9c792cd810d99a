"""A rich progress bar fed by the library's progress callback."""

from __future__ import annotations

from types import TracebackType

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from roberta_static.finetune import FinetuneProgress
from roberta_static.progress import Plan
from roberta_static.progress import Progress as Report


class RateColumn(ProgressColumn):
    """Rate of one counter kept in the task's fields, per second of elapsed time."""

    def __init__(self, field: str, unit: str) -> None:
        super().__init__()
        self.field, self.unit = field, unit

    def render(self, task: Task) -> Text:
        """Show ``<rate> <unit>/s``."""
        elapsed = task.elapsed or 0.0
        rate = task.fields.get(self.field, 0) / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} {self.unit}/s", style="progress.data.speed")


class DistillProgress:
    """Context manager whose ``update`` method is the library's progress callback."""

    def __init__(self, disable: bool = False) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            RateColumn("sentences", "sent"),
            RateColumn("tokens", "tok"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            disable=disable,
            transient=False,
        )
        self._tasks: dict[str, int] = {}
        self._quiet = disable

    def __enter__(self) -> DistillProgress:
        # The bar starts at the first report: a run that fails before it prints nothing.
        self._started = False
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._started:
            self._progress.__exit__(kind, error, tb)

    def _start(self) -> None:
        if not self._started:
            self._progress.start()
            self._started = True

    def update(self, report: Report | Plan) -> None:
        """Move the bar of ``report.stage`` to the reported position; print a plan."""
        self._start()
        if isinstance(report, Plan):
            if not self._quiet:
                self._progress.console.print(f"accumulator: {report}")
            return
        if report.stage not in self._tasks:
            label = "counting words" if report.stage == "count" else "distilling"
            self._tasks[report.stage] = self._progress.add_task(
                label, total=report.total_bytes, sentences=0, tokens=0
            )
        self._progress.update(
            self._tasks[report.stage],
            completed=report.bytes_read,
            sentences=report.sentences,
            tokens=report.tokens,
        )


class FinetuneProgressBar:
    """Context manager whose ``update`` is ``finetune``'s progress callback: steps, loss, tokens/s."""

    def __init__(self, disable: bool = False) -> None:
        self._progress = Progress(
            TextColumn("fine-tuning"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            RateColumn("tokens", "tok"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            disable=disable,
            transient=False,
        )
        self._task: int | None = None

    def __enter__(self) -> FinetuneProgressBar:
        return self  # the bar starts with the first step, after the model has loaded

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._progress.__exit__(kind, error, tb)

    def update(self, report: FinetuneProgress) -> None:
        """Move the bar to the reported step."""
        if self._task is None:
            self._progress.__enter__()
            self._task = self._progress.add_task("", total=report.total_steps, loss="-", tokens=0)
        loss = "-" if report.loss is None else f"{report.loss:.3f}"
        self._progress.update(self._task, completed=report.step, loss=loss, tokens=report.tokens)
