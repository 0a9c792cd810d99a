"""`roberta-static tune`: tuned vectors from a vectors folder's sentence targets."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from roberta_static.progress import TuneProgress
from roberta_static.tuning.config import HEADS, LOSSES, MINIMUMS, TuneConfig

from ._util import Arg, Opt, choices, one_line_errors
from .options import OVERWRITE, QUIET
from .progress import StepsBar

Loss = choices("Loss", LOSSES)
Head = choices("Head", HEADS)


def _default(option: str) -> Any:
    return next(f.default for f in dataclasses.fields(TuneConfig) if f.name == option)


def _positive(value: float | None) -> float | None:
    """Typer's ``min=0`` allows 0, which these options refuse."""
    if value is not None and not value > 0:
        raise typer.BadParameter(f"{value} is not > 0")
    return value


# fmt: off
def tune_command(
    vectors: Path = Arg(..., help="A vectors folder distill wrote with sentence targets (targets/)", show_default=False),
    out: Path = Opt(..., "--out", "-o", help="Output folder for the tuned vectors (vectors.npy, vocab.tsv, weights.npy, meta.json; offset.npy with --head fold)", show_default=False),
    loss: Loss = Opt(_default("loss"), help="cosine: 1 - the cosine of the head's output and the teacher's sentence vector; mse: their mean squared difference"),
    learning_rate: float = Opt(_default("learning_rate"), "--learning-rate", callback=_positive, help="Adam's step size for the vectors, weights and head, > 0"),
    batch_size: int = Opt(_default("batch_size"), "--batch-size", min=MINIMUMS["batch_size"], help="Sentences per step"),
    max_epochs: int = Opt(_default("max_epochs"), "--max-epochs", min=MINIMUMS["max_epochs"], help="Passes over the training sentences at most"),
    patience: int = Opt(_default("patience"), "--patience", min=MINIMUMS["patience"], help="Epochs without a better held-out loss before stopping (the best epoch is kept)"),
    held_out: float = Opt(_default("held_out"), "--held-out", callback=_positive, max=0.5, help="Share of the sentences held out to measure the loss, > 0"),
    max_held_out: int = Opt(_default("max_held_out"), "--max-held-out", min=MINIMUMS["max_held_out"], help="The most sentences held out"),
    remove_top_pcs: int = Opt(_default("remove_top_pcs"), "--remove-top-pcs", min=0, help="Top principal components removed from the vectors before training (the spaCy component's doc_vector weighted removes 4)"),
    sif_coefficient: float | None = Opt(None, "--sif-coefficient", callback=_positive, max=1, help="Start each weight at its SIF weight a/(a + p(word)), > 0 (the spaCy component's doc_vector weighted uses 1e-3); without it every weight starts at 1", show_default=False),
    seed: int = Opt(_default("seed"), "--seed", min=0, help="Seed of the held-out split and the order of the sentences"),
    head: Head = Opt(_default("head"), help="fold: the head that maps a text's vector to the teacher's is folded into the vectors (its bias becomes offset.npy); drop: left out, as tokenlearn does"),
    device: str = Opt(_default("device"), "--device", help="auto = CUDA, then MPS, then CPU; cpu, cuda, cuda:N or mps"),
    overwrite: bool = OVERWRITE,
    quiet: bool = QUIET,
) -> None:
    # fmt: on
    """Tune vectors for documents: learn each entry's vector and weight from the teacher's sentence vectors.

    A text's vector is then the mean of its words' vectors times their learned weights, plus the learned offset: what the spaCy component's doc_vector weighted and the exports give. Word similarities may get worse: use the folder distill wrote for words.
    """
    with one_line_errors():
        config = TuneConfig(
            loss=loss.value, learning_rate=learning_rate, batch_size=batch_size,
            max_epochs=max_epochs, patience=patience, held_out=held_out,
            max_held_out=max_held_out, remove_top_pcs=remove_top_pcs,
            sif_coefficient=sif_coefficient, seed=seed, head=head.value, device=device,
        )
        from roberta_static.atomic import check_not_source, output_lock
        from roberta_static.tuning.run import tune

        check_not_source(out, vectors)
        with output_lock(out), TuneProgressBar(disable=quiet) as bar:
            tuned = tune(vectors, out, config, overwrite=overwrite, progress=bar.update)
        if not quiet:
            typer.echo(summary(tuned.meta["tune"], out))
        if tuned.meta["tune"]["best_epoch"] == 0:
            typer.echo(
                f"warning: no epoch bettered the held-out loss of the start, so {out} holds the "
                f"start (the distilled vectors and the weights they started with, and the "
                f"least-squares head if folded); try a smaller --learning-rate than "
                f"{learning_rate:g}, or more sentences (distill --sentence-targets)",
                err=True,
            )


def summary(record: dict[str, Any], out: Path) -> str:
    """One line: the held-out loss and cosine before and after, the epochs, where it went."""
    loss, cosine = record["held_out_loss"], record["held_out_cosine"]
    # Dropped, the head that gave these figures is not in what was written.
    through = " through the dropped head" if record["config"]["head"] == "drop" else ""
    return (
        f"held-out loss {loss['start']:.4g} -> {loss['best']:.4g} (cosine to the teacher"
        f"{through} {cosine['start']:.3f} -> {cosine['best']:.3f}), best of {record['epochs']} "
        f"epochs at {record['best_epoch']}, {record['seconds']:.1f} s; wrote {out}"
    )


class TuneProgressBar(StepsBar):
    """Context manager whose ``update`` is ``tune``'s progress callback: epochs, steps, loss."""

    def __init__(self, disable: bool = False) -> None:
        super().__init__(
            TextColumn("tuning, epoch {task.fields[epoch]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}, best held-out {task.fields[best]}"),
            TimeElapsedColumn(),
            disable=disable,
        )

    def update(self, report: TuneProgress) -> None:
        """Move the bar to the reported step of the reported epoch."""
        self.show(
            report.step,
            report.steps_per_epoch,
            epoch=f"{report.epoch}/{report.max_epochs}",
            loss=f"{report.loss:.4g}",
            best=f"{report.best:.4g}",
        )
