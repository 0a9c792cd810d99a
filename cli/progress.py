"""A rich progress bar fed by the library's progress callback."""

from __future__ import annotations

from datetime import timedelta
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

from roberta_static.progress import FinetuneProgress, Plan
from roberta_static.progress import Progress as Report


class RateColumn(ProgressColumn):
    """Rate of one counter kept in the task's fields, per second of elapsed time.

    Blank for a task without that counter (counting words has no sentences or tokens).
    """

    def __init__(self, field: str, unit: str) -> None:
        super().__init__()
        self.field, self.unit = field, unit

    def render(self, task: Task) -> Text:
        """Show ``<rate> <unit>/s``."""
        if self.field not in task.fields:
            return Text("")
        elapsed = task.elapsed or 0.0
        rate = task.fields[self.field] / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} {self.unit}/s", style="progress.data.speed")


class RemainingColumn(ProgressColumn):
    """Time left at this run's mean rate: what it did since it started, over its time.

    Steadier than rich's estimate over the last seconds, which swings with every chunk; a
    resumed run's earlier part (its ``start_bytes`` field) is not counted as done in no time.
    """

    def render(self, task: Task) -> Text:
        """Show ``h:mm:ss``, or ``-:--:--`` before there is a rate."""
        done = task.completed - task.fields.get("start_bytes", 0)
        elapsed = task.elapsed or 0.0
        if task.total is None or done <= 0 or elapsed <= 0:
            return Text("-:--:--", style="progress.remaining")
        left = max(0.0, task.total - task.completed) * elapsed / done
        return Text(str(timedelta(seconds=int(left))), style="progress.remaining")


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
            RemainingColumn(),
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
        counters = {}
        if report.stage == "distill":
            counters = {"sentences": report.sentences, "tokens": report.tokens}
        if report.stage not in self._tasks:
            label = "counting words" if report.stage == "count" else "distilling"
            self._tasks[report.stage] = self._progress.add_task(
                label,
                total=report.total_bytes,
                completed=report.bytes_done,
                start_bytes=report.start_bytes,
                **counters,
            )
        self._progress.update(self._tasks[report.stage], completed=report.bytes_done, **counters)


class StepsBar:
    """A bar of steps: it starts with the first report (after the slow start-up), ends with the block.

    Subclasses give the columns and turn their reports into :meth:`show` calls.
    """

    def __init__(self, *columns: ProgressColumn, disable: bool = False) -> None:
        self._progress = Progress(*columns, disable=disable, transient=False)
        self._task: int | None = None

    def __enter__(self) -> StepsBar:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._progress.__exit__(kind, error, tb)

    def show(self, completed: int, total: int, **fields: object) -> None:
        """Move the bar to ``completed`` of ``total`` steps, with the columns' ``fields``."""
        if self._task is None:
            self._progress.__enter__()
            self._task = self._progress.add_task("", total=total, **fields)
        self._progress.update(self._task, completed=completed, total=total, **fields)


class FinetuneProgressBar(StepsBar):
    """Context manager whose ``update`` is ``finetune``'s progress callback: steps, loss, tokens/s."""

    def __init__(self, disable: bool = False) -> None:
        super().__init__(
            TextColumn("fine-tuning"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            RateColumn("tokens", "tok"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            disable=disable,
        )

    def update(self, report: FinetuneProgress) -> None:
        """Move the bar to the reported step."""
        loss = "-" if report.loss is None else f"{report.loss:.3f}"
        self.show(report.step, report.total_steps, loss=loss, tokens=report.tokens)
