"""The installed package's version (a leaf module: anything may import it)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("roberta-static")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
