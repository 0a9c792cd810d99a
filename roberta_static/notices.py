"""What a finished run tells its user: entries left without a vector, input skipped or repaired.

The command line prints these lines; :func:`~roberta_static.distill` issues each as a
:class:`~roberta_static.errors.RobertaStaticWarning`, as spaCy warns and gensim logs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from .errors import RobertaStaticWarning, short_list
from .text.corpus import MAX_UNIT_BYTES, Corpus, TextCorpus
from .text.languages import unspaced_script

Spelling = Callable[[str, Any], str]
"""How an option with a value is written: ``--lang zh`` on the command line, ``lang='zh'`` here."""
_SAMPLE_TEXTS = 200  # texts read back for the language hint, at most


def as_argument(option: str, value: Any) -> str:
    """An option as :class:`~roberta_static.config.DistillConfig` takes it: ``lang='zh'``."""
    return f"{option}={value!r}"


def as_flag(option: str, value: Any) -> str:
    """An option as the command line takes it: ``--lang zh``."""
    return f"--{option.replace('_', '-')} {value}"


def entry_notes(stats: dict[str, Any], listed_in: str) -> list[str]:
    """The entries the vectors lack, and the vocabulary's lines skipped, one line each.

    ``listed_in``: where the whole lists are (``meta.json``).
    """
    notes = []
    for key, what in (
        ("entries_not_found", "not found in the corpus"),
        ("entries_not_encoded", "found, but too long for the model's input (or without subwords)"),
    ):
        if stats.get(key):
            notes.append(
                f"{what} ({len(stats[key]):,}): {short_list(stats[key])} (all in {listed_in})"
            )
    not_filled = stats["fill"].get("not_filled")
    if not_filled:
        notes.append(
            f"not filled, too long for the model's input alone (or without subwords) "
            f"({len(not_filled):,}): {short_list(not_filled)} (all in {listed_in})"
        )
    skipped = stats["vocabulary"]
    if skipped.get("duplicates") or skipped.get("blank_lines"):
        notes.append(
            f"vocabulary: {skipped['duplicates']:,} duplicate entries and "
            f"{skipped['blank_lines']:,} blank lines skipped"
        )
    left_out = skipped.get("left_out")
    if left_out:
        notes.append(
            f"left out of the vocabulary, as an export would spell them as a more frequent word "
            f"({len(left_out):,}): {short_list(left_out)} (all in {listed_in})"
        )
    return notes


def input_warnings(stats: dict[str, Any], spell: Spelling = as_argument) -> list[str]:
    """Input that was skipped or repaired, and a mapped fill that its own check finds worse."""
    found = []
    if stats["bad_bytes"]:
        found.append(f"{stats['bad_bytes']:,} invalid UTF-8 bytes replaced")
    if stats.get("lines_cut"):  # absent from the meta.json of older runs
        found.append(
            f"{stats['lines_cut']:,} lines longer than {MAX_UNIT_BYTES // 1000:,} kB read as "
            "several units each (cut at a space where there is one)"
        )
    if stats["batches_recomputed_float32"]:
        found.append(
            f"{stats['batches_recomputed_float32']:,} batches overflowed to NaN/Inf in "
            f"half precision and were run again in float32 ({spell('dtype', 'float32')} avoids "
            "the retries)"
        )
    binary = stats["binary_files_skipped"]
    if binary:
        found.append(f"{len(binary):,} binary files (NUL bytes) skipped: {short_list(binary, 3)}")
    check = stats["fill"].get("held_out")
    if check and check["mapped_cosine"] < check["decontextualized_cosine"]:
        found.append(
            "on its held-out check the mapped fill is further from the seen entries' context "
            f"averages than decontextualized ({check['entries']:,} entries, mean cosine "
            f"{check['mapped_cosine']:.3f} against {check['decontextualized_cosine']:.3f}): "
            f"{spell('fill_unseen', 'decontextualized')} may suit this run better"
        )
    return found


def language_warning(
    stats: dict[str, Any],
    config: dict[str, Any],
    texts: Iterable[str],
    spell: Spelling = as_argument,
) -> str | None:
    """Most entries not found in a corpus whose script the language's tokenizer cannot split.

    ``texts``: the corpus's texts, of which the first few are read.
    """
    missing, entries = len(stats["entries_not_found"]), stats["entries"]
    if missing * 2 <= entries:
        return None
    hint = language_hint(config["lang"], config.get("spacy_model"), texts, spell)
    return f"{missing:,} of {entries:,} entries not found; {hint}" if hint else None


def language_hint(
    lang: str, spacy_model: str | None, texts: Iterable[str], spell: Spelling
) -> str | None:
    """What to pass instead of ``lang`` when the texts are in a script it cannot split."""
    if spacy_model:
        return None
    script = unspaced_script("\n".join(islice(texts, _SAMPLE_TEXTS)), lang)
    if script is None:
        return None
    name, instead = script
    return (
        f"the corpus is written in {name}, without spaces between words, which "
        f"{spell('lang', lang)} does not split into words: try {spell('lang', instead)}"
    )


def texts_again(corpus: Corpus | TextCorpus) -> Iterator[str]:
    """The corpus's texts, read anew when iterated (none from a generator, read once already)."""
    if isinstance(corpus, Corpus):
        yield from Corpus(corpus.files, corpus.text_field)
    elif corpus.reiterable:
        yield from (text for text in corpus.texts if isinstance(text, str))


def warn_about_run(meta: dict[str, Any], texts: Iterable[str]) -> None:
    """Issue each note and warning of a finished run as a :class:`RobertaStaticWarning`.

    They point at the line that called ``distill`` (through its wrapper, see
    :func:`~roberta_static.debug.tells_all`).
    """
    stats = meta["stats"]
    language = language_warning(stats, meta["config"], texts)
    notes = entry_notes(stats, "vectors.meta['stats']") + input_warnings(stats)
    for note in notes + ([language] if language else []):
        warnings.warn(note, RobertaStaticWarning, stacklevel=4)
