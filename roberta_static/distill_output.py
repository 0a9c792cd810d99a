"""The folder a distill run writes: which folder it may write into, and writing it.

Before a run, :func:`check_output` refuses a folder the finished vectors could not replace, so no
work is done for nothing; after it, :func:`write_output` writes the vectors and their exports into
the folder in one atomic swap. A distill folder holds vectors (with exports), the checkpoint of an
unfinished run (``.checkpoint/``), or both while a run over an earlier output is under way; an
error once work is kept there says how to go on (:func:`says_how_to_go_on`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .atomic import atomic_directory, check_output_dir
from .engine.checkpoint import CHECKPOINT_DIR, checkpoint_entries
from .errors import ConfigError, Interrupted, OutputError, RobertaStaticError
from .formats.exports import parse_formats, vectors_folder_entries, write_exports
from .stopping import Checkpointing
from .vectors.static import StaticVectors

OUTPUT_KINDS = (vectors_folder_entries, checkpoint_entries)


def check_output(
    out: str | os.PathLike, overwrite: bool = False, *, resuming: bool = False
) -> None:
    """Refuse an output folder a run may not write into; call it before the run.

    A new or empty folder is fine. One that roberta-static wrote (vectors, a checkpoint) is
    replaced only with ``overwrite``, and one holding anything else never is.

    Args:
        out: The output folder.
        overwrite: Replace an earlier output, or start an unfinished run's checkpoint again.
        resuming: The run goes on from the checkpoint in ``out``, so that checkpoint is expected.

    Raises:
        OutputError: ``out`` holds files roberta-static did not write, is not empty and not
            ``overwrite``, or holds an unfinished run's checkpoint and neither ``resuming`` nor
            ``overwrite``.

    Example:
        >>> check_output("out/new-folder")  # doctest: +SKIP

    """
    out = Path(out)
    unfinished = (out / CHECKPOINT_DIR).exists()
    check_output_dir(out, overwrite or resuming or unfinished, OUTPUT_KINDS)
    if unfinished and not (overwrite or resuming):
        raise OutputError(
            f"{out}: holds the checkpoint of an unfinished run; pass --resume {out} to continue "
            "or --overwrite to start again"
        )


def write_output(
    vectors: StaticVectors,
    out: str | os.PathLike,
    formats: Iterable[str] = (),
    sif_coefficient: float | None = None,
    *,
    overwrite: bool = False,
    finishes_checkpoint: bool = False,
) -> Path:
    """Write ``vectors`` and their exports into ``out``, replacing it whole when all is written.

    Args:
        vectors: The vectors, as ``distill`` returns them.
        out: The output folder (see :func:`check_output` for what may be replaced).
        formats: Exports to write beside the vectors (see
            :func:`~roberta_static.formats.exports.write_exports`).
        sif_coefficient: SIF weighting of the model2vec and sentence-transformers exports.
        overwrite: Replace an earlier output of roberta-static.
        finishes_checkpoint: ``vectors`` come from the run whose checkpoint ``out`` holds (it
            wrote it, or resumed from it): they replace that checkpoint.

    Returns:
        ``out``.

    Raises:
        OutputError: ``out`` may not be replaced, or writing failed (``out`` is then unchanged).
        VectorsError: ``vectors`` hold NaN or Inf.

    Example:
        >>> vectors = distill("corpus.txt", "vocab.txt", config)  # doctest: +SKIP
        >>> write_output(vectors, "out", ["kv"])  # doctest: +SKIP

    """
    formats = parse_formats(formats)  # an unknown name is refused before anything is written
    with atomic_directory(out, overwrite or finishes_checkpoint, OUTPUT_KINDS) as staging:
        vectors.write_into(staging)
        write_exports(vectors, staging, formats, sif_coefficient, out)
    return Path(out)


@contextmanager
def says_how_to_go_on(
    out: Path, resumed: bool, checkpointing: Checkpointing, output_options: str = ""
) -> Iterator[None]:
    """Errors once the work is kept in a checkpoint say how to go on: fix or free space, resume.

    The checkpoint is this run's, or the one it ``resumed``. ``output_options`` (such as
    `` --formats kv``) are not kept in the checkpoint, so the resume command names them.
    """
    resume = f"roberta-static distill --resume {out}"
    try:
        yield
    except Interrupted as error:
        if output_options and str(error).endswith(resume):  # a stop says how to resume itself
            raise Interrupted(f"{error}{output_options}") from None
        raise
    except RobertaStaticError as error:
        # An option refused (with --resume, say) leaves the checkpoint as it was: no "go on".
        if isinstance(error, ConfigError) or not (resumed or checkpointing.written):
            raise
        if not isinstance(error, OutputError):
            then = f"the work before it is kept in {out / CHECKPOINT_DIR}: fix the input, then"
        elif error.errno in (errno.ENOSPC, errno.EDQUOT):
            then = "free space, then"
        else:
            then = "once it can be written,"
        raise type(error)(f"{error}; {then} resume with: {resume}{output_options}") from None
