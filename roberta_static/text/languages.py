"""spaCy's languages and pipelines, checked without importing spaCy; scripts written unspaced.

Importing spaCy takes seconds (its thinc imports torch), so a bad ``--lang`` or ``--spacy-model``
is found from what is installed: the languages of spaCy's ``spacy/lang`` folders and those other
packages register (entry points ``spacy_languages``), and the installed pipelines.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
import unicodedata
from pathlib import Path

from ..errors import ConfigError, short_list

_ISO_CODE = re.compile(r"[a-z]{2,3}")  # spaCy also takes ISO 639-2/3 codes (eng) for its own
_BLANK = "blank:"
# Scripts written without spaces between words (by the first word of a letter's Unicode name),
# and the spaCy languages whose tokenizers split them into words.
_UNSPACED = {
    "CJK": ("Chinese characters", ("zh", "ja")),
    "HIRAGANA": ("Japanese kana", ("ja",)),
    "KATAKANA": ("Japanese kana", ("ja",)),
    "THAI": ("Thai script", ("th",)),
    "TIBETAN": ("Tibetan script", ("bo",)),
}


def check_language(lang: str) -> None:
    """Refuse a language code spaCy does not know.

    A code shaped like an ISO one (two or three lowercase letters) that names no language folder
    is left to spaCy, which knows aliases (``eng`` for ``en``).

    Raises:
        ConfigError: Naming the field ``lang``.

    Example:
        >>> check_language("en")
        >>> check_language("klingon")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        roberta_static.errors.ConfigError: lang: spaCy has no language 'klingon'

    """
    if not _known_language(lang) and not _ISO_CODE.fullmatch(lang):
        codes = sorted(_languages())
        raise ConfigError(
            f"spaCy has no language {lang!r} (its codes: {short_list(codes, 12)})", field="lang"
        )


def check_pipeline(name: str) -> None:
    """Refuse a spaCy pipeline that is no folder, installed package or ``blank:LANG``.

    Raises:
        ConfigError: Naming the field ``spacy_model``.

    """
    if name.startswith(_BLANK):
        check_language(name.removeprefix(_BLANK))
    elif Path(name).exists():
        return
    elif any(mark in name for mark in "/\\.") or importlib.util.find_spec(name) is None:
        # A pipeline package's name has no dot (find_spec would import the part before it).
        raise ConfigError(
            f"no installed spaCy pipeline or folder named {name!r} (install one with: python -m "
            "spacy download NAME)",
            field="spacy_model",
        )


def _known_language(lang: str) -> bool:
    if "spacy" in sys.modules:  # imported already: ask it, languages registered in code included
        from spacy.util import registry

        return lang in registry.languages or lang in _languages()
    return lang in _languages()


def _languages() -> set[str]:
    """The codes of spaCy's language folders, and of the languages that packages register."""
    spec = importlib.util.find_spec("spacy")
    folders = (
        [Path(place) / "lang" for place in (spec.submodule_search_locations or [])] if spec else []
    )
    codes = {
        entry.name
        for folder in folders
        if folder.is_dir()
        for entry in folder.iterdir()
        if (entry / "__init__.py").is_file()
    }
    return codes | {
        entry.name for entry in importlib.metadata.entry_points(group="spacy_languages")
    }


def unspaced_script(text: str, lang: str) -> tuple[str, str] | None:
    """The script of most of ``text``'s letters, if unspaced and ``lang`` cannot split it.

    Scripts written without spaces between words (Chinese characters, say) are split into words
    only by the tokenizers of some languages (zh, ja); ``en``'s reads a whole clause as one word.

    Returns:
        The script's name and a spaCy language code, or None.

    Example:
        >>> unspaced_script("北京是中国的首都。", "en")
        ('Chinese characters', 'zh')

    """
    letters = [character for character in text if character.isalpha()]
    scripts = [unicodedata.name(character, "").split(" ")[0] for character in letters]
    unspaced = [script for script in scripts if script in _UNSPACED]
    if not letters or len(unspaced) * 2 <= len(letters):
        return None
    kana = sum(script in ("HIRAGANA", "KATAKANA") for script in unspaced)
    main = "HIRAGANA" if kana * 10 > len(unspaced) else max(set(unspaced), key=unspaced.count)
    name, languages = _UNSPACED[main]
    return None if lang in languages else (name, languages[0])
