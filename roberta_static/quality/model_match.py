"""Whether the model given for the layer view is the one the vectors were distilled with.

Through another model the layer view compares two models' spaces, and its cosines mean nothing.
``meta.json`` records the model: its name, and the SHA-256 of a folder's weights file or the hub
commit (``model_fingerprint``). The weights decide wherever both can be found: a folder's file, or
the local Hugging Face cache's copy of a hub model (at the recorded commit), so the same weights
under another path, or a folder downloaded from the hub, are the same model. Where one side's
weights cannot be found (a record from before fingerprints, a hub model not in the cache, a spaCy
pipeline), the same name is taken as the same model, and the name is all that was compared.
Needs no torch: the check runs before any model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from ..model.sources import (
    SPACY_PREFIX,
    cached_snapshot,
    resolve_model_name,
    weights_digest,
)

ALLOW_FLAG = "--allow-other-model"
Verdict = Literal["same", "same name", "other", "unrecorded"]


@dataclass(frozen=True)
class ModelMatch:
    """The model given, against the one the vectors record.

    Attributes:
        given: The model as given (a hub id, a folder, ``minilm``, ``spacy:PIPELINE``).
        recorded: The model ``meta.json`` names; None when the vectors record none.
        verdict: ``same`` (the same weights), ``same name`` (the weights could not be compared),
            ``other``, or ``unrecorded``.
        reason: How that was decided, in words.

    """

    given: str
    recorded: str | None
    verdict: Verdict
    reason: str

    def __str__(self) -> str:
        """One sentence for a person: which model, and whether it is the vectors'."""
        if self.verdict == "unrecorded":
            return f"{self.given}; {self.reason}, so whether it is theirs was not checked"
        if self.verdict == "other":
            return (
                f"{self.given}, not the model the vectors were distilled with ({self.recorded}): "
                f"{self.reason}"
            )
        return f"{self.given}, the model the vectors were distilled with ({self.reason})"


def match_model(recorded: Mapping[str, Any], given: str) -> ModelMatch:
    """Compare the model named ``given`` with ``recorded``, the ``model`` of ``meta.json``.

    Raises:
        ModelLoadError: ``given`` names a folder that does not exist, or a missing package.

    """
    name = recorded.get("name")
    if not name:
        return ModelMatch(given, None, "unrecorded", "the vectors record no model")
    ours = _given_weights(given)
    theirs = recorded.get("sha256") or _hub_weights(name, recorded.get("revision"))
    if ours and theirs:
        if ours == theirs:
            return ModelMatch(given, name, "same", f"the same weights, SHA-256 {ours[:12]}")
        reason = f"other weights, SHA-256 {ours[:12]} against {theirs[:12]}"
        return ModelMatch(given, name, "other", reason)
    if not recorded.get("sha256") and not recorded.get("revision"):
        missing = "meta.json records no fingerprint of its weights"
    elif not theirs:
        missing = f"the weights of {name} it records are not on this machine"
    else:
        missing = f"no weights file of {given} to compare"
    if given == name or _same_folder(given, recorded.get("path")):
        return ModelMatch(given, name, "same name", f"the same name; {missing}")
    return ModelMatch(given, name, "other", f"another name, and {missing}")


def check_model(
    recorded: Mapping[str, Any], given: str, allow_other_model: bool = False
) -> ModelMatch:
    """:func:`match_model`, refusing another model unless ``allow_other_model``.

    Raises:
        ConfigError: ``given`` is not (or cannot be shown to be) the recorded model (field
            ``model``).
        ModelLoadError: As :func:`match_model`.

    """
    match = match_model(recorded, given)
    if match.verdict == "other" and not allow_other_model:
        raise ConfigError(
            f"{given} is not the model the vectors were distilled with, {match.recorded} "
            f"({match.reason}); give that model, or pass {ALLOW_FLAG} to use this one anyway",
            field="model",
        )
    return match


def _given_weights(given: str) -> str | None:
    """The SHA-256 of the weights ``given`` names: a folder's, or the hub cache's newest copy."""
    if given.startswith(SPACY_PREFIX):
        return None  # inside a spaCy pipeline; found only by loading it
    location = Path(resolve_model_name(given))
    if location.is_dir():
        found = weights_digest(location)
        return found[1] if found else None
    return _hub_weights(given, None)


def _hub_weights(repo_id: str, revision: str | None) -> str | None:
    """The SHA-256 of the hub model's weights in the local cache (at ``revision``), if there."""
    if repo_id.startswith(SPACY_PREFIX) or Path(repo_id).expanduser().is_dir():
        return None
    folder = cached_snapshot(repo_id, revision)
    found = weights_digest(folder) if folder is not None else None
    return found[1] if found else None


def _same_folder(given: str, recorded_path: str | None) -> bool:
    """Whether ``given`` is the folder ``meta.json`` records (its absolute path)."""
    if recorded_path is None or given.startswith(SPACY_PREFIX):
        return False
    location = Path(resolve_model_name(given))
    return location.is_dir() and location.resolve() == Path(recorded_path).resolve()
