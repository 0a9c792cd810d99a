"""``meta.json`` values as a person reads them: words, units and three significant digits.

One helper for every place that shows metadata (``roberta-static info``, the HTML report), so
they agree; ``info --json`` prints the file as it is.

Example:
    >>> value_text("encoder_wait_seconds", 0.25246325500029343)
    '0.252 s'
    >>> rows({"batch_tokens": None, "vocabulary": {"duplicates": 0, "blank_lines": 0}})
    [('batch tokens', 'not set'), ('vocabulary', 'duplicates 0, blank lines 0')]

"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import short_list
from .progress import size_text

NOT_SET = "not set"
DEFAULT = "not set (default)"  # an option left unset: the library chose
LISTED = 10  # items of a list shown before "and N more"


def rows(section: Mapping[str, Any], none: str = NOT_SET) -> list[tuple[str, str]]:
    """Each ``(label, value)`` of one section of ``meta.json`` (``none`` stands for null)."""
    return [(label(key), value_text(key, value, none)) for key, value in section.items()]


def steps_text(steps: list[Mapping[str, Any]]) -> str:
    """The ``postprocessing`` steps of ``meta.json``: ``center, remove top pcs 2; normalize``.

    Example:
        >>> steps_text([{"center": True, "remove_top_pcs": 2, "pca": None}]), steps_text([])
        ('center, remove top pcs 2', 'none')

    """
    parts = [
        ", ".join(
            label(k) if v is True else f"{label(k)} {value_text(k, v)}"
            for k, v in step.items()
            if v
        )
        for step in steps
    ]
    return "; ".join(part for part in parts if part) or "none"


def label(key: str) -> str:
    """``encoder_wait_seconds`` as ``encoder wait``: words, with the unit left to the value."""
    if key == "seconds":
        return "time"
    return key.removesuffix("_seconds").replace("_", " ")


def value_text(key: str, value: Any, none: str = NOT_SET) -> str:
    """``value`` in words: yes/no, units from ``key``'s name (seconds, bytes), lists shortened."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _quantity(key, value)
    if isinstance(value, Mapping):
        return _mapping_text(value, none) or "none"
    if isinstance(value, (list, tuple)):
        return short_list([value_text(key, item, none) for item in value], LISTED) or "none"
    return str(value)


def number(value: float) -> str:
    """A count exactly, with thousands separators; a measurement to three significant digits.

    Example:
        >>> number(33415), number(0.25246), number(28.026), number(12345.6), number(2.0)
        ('33,415', '0.252', '28.0', '12,300', '2.00')

    """
    if isinstance(value, int) or not math.isfinite(value):
        return f"{value:,}" if isinstance(value, int) else str(value)
    if value != 0:
        value = round(value, 2 - math.floor(math.log10(abs(value))))
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")


def duration(seconds: float) -> str:
    """``0.252 s``, ``28.0 s``, ``4 min 12 s``, ``2 h 05 min``.

    Example:
        >>> duration(0.25246), duration(252.4), duration(7500)
        ('0.252 s', '4 min 12 s', '2 h 05 min')

    """
    if seconds < 59.95:  # what would show as 60.0 s is a minute
        return f"{number(float(seconds))} s"
    if round(seconds) < 3600:
        return "{} min {} s".format(*divmod(round(seconds), 60))
    return "{} h {:02d} min".format(*divmod(round(seconds / 60), 60))


def _quantity(key: str, value: float) -> str:
    """A number, with the unit ``key`` names: seconds, or a size in bytes."""
    if key == "seconds" or key.endswith("_seconds"):
        return duration(value)
    if key == "bytes":  # a size (``bad_bytes`` counts bytes that could not be decoded)
        return size_text(int(value))
    return number(value)


def _mapping_text(value: Mapping[str, Any], none: str) -> str:
    """``duplicates 0, blank lines 0``; a nested mapping in parentheses; paths kept as they are.

    Empty lists and mappings inside are left out.
    """
    parts = []
    for key, item in value.items():
        if isinstance(item, (list, tuple, Mapping)) and not item:
            continue  # "not filled none" says nothing
        name = label(key) if key.isidentifier() else key
        shown = value_text(key, item, none)
        parts.append(f"{name} ({shown})" if isinstance(item, Mapping) else f"{name} {shown}")
    return ", ".join(parts)
