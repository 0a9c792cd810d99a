"""The component's settings: the choices of ``mode``, ``case`` and ``doc_vector``, and the defaults.

A leaf (spaCy's config parser, and the document vectors' choices from the numpy-only core): the
factories, the component, the tables and the loader callback all take these, and none of them is
imported for it.
"""

from __future__ import annotations

from typing import Literal

from thinc.api import Config

from roberta_static.vectors.docvectors import (
    DEFAULT_DOC_VECTOR,
    DOC_VECTORS,
    REMOVE_TOP_PCS,
    SIF_COEFFICIENT,
    DocVector,
)

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_DOC_VECTOR",
    "DOC_VECTORS",
    "REMOVE_TOP_PCS",
    "SIF_COEFFICIENT",
    "CasePolicy",
    "DocVector",
    "Mode",
]

Mode = Literal["replace", "add"]
CasePolicy = Literal["auto", "lower", "keep"]

DEFAULT_CONFIG_STR = f"""
[roberta_static]
vectors = null
mode = "replace"
case = "auto"
allow_pickle = false
replace_trained_vectors = false
doc_vector = "{DEFAULT_DOC_VECTOR}"
remove_top_pcs = {REMOVE_TOP_PCS}
sif_coefficient = {SIF_COEFFICIENT}
"""
DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)["roberta_static"]
