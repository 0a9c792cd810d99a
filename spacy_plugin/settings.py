"""The component's settings: the choices of ``mode`` and ``case``, and the factory's defaults.

A leaf (spaCy's config parser only): the factories, the component, the tables and the loader
callback all take these, and none of them is imported for it.
"""

from __future__ import annotations

from typing import Literal

from thinc.api import Config

Mode = Literal["replace", "add"]
CasePolicy = Literal["auto", "lower", "keep"]

DEFAULT_CONFIG_STR = """
[roberta_static]
vectors = null
mode = "replace"
case = "auto"
allow_pickle = false
replace_trained_vectors = false
"""
DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)["roberta_static"]
