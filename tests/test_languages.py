"""Language codes and pipelines are checked as spaCy would, without importing spaCy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from roberta_static.errors import ConfigError
from roberta_static.text.languages import check_language, check_pipeline, unspaced_script

CODES = ["en", "zh", "xx", "de", "eng", "zho", "klingon", "EN", "english", "tlh", "e", "en_US"]


@pytest.mark.parametrize("code", CODES)
def test_a_code_refused_is_one_spacy_refuses_too(code):
    import spacy

    try:
        spacy.util.get_lang_class(code)
        spacy_knows = True
    except ImportError:
        spacy_knows = False
    try:
        check_language(code)
    except ConfigError as error:
        assert not spacy_knows, f"{code}: refused, but spaCy has it"
        assert error.field == "lang" and f"spaCy has no language {code!r}" in error.problem
        return
    # Left to spaCy: a code it knows, or one shaped like an ISO code (its aliases).
    assert spacy_knows or (code.islower() and len(code) in (2, 3)), code


def test_the_checks_import_no_spacy():
    code = (
        "import sys\n"
        "from roberta_static.text.languages import check_language, check_pipeline\n"
        "check_language('en')\n"
        "for bad in (lambda: check_language('klingon'), lambda: check_pipeline('xx_no_such')):\n"
        "    try: bad()\n"
        "    except ValueError: pass\n"
        "print(sorted(m for m in ('spacy', 'torch', 'thinc') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_pipeline_is_a_folder_an_installed_package_or_blank(tmp_path):
    check_pipeline(str(tmp_path))
    check_pipeline("blank:fr")
    with pytest.raises(ConfigError, match="spaCy has no language 'klingon'"):
        check_pipeline("blank:klingon")
    for missing in ("xx_no_such_pipeline", "./no/such/folder", "en_core_web_sm.meta"):
        with pytest.raises(ConfigError) as caught:
            check_pipeline(missing)
        assert caught.value.field == "spacy_model"
        assert caught.value.problem.startswith(
            f"no installed spaCy pipeline or folder named {missing!r}"
        )


@pytest.mark.parametrize(
    ("text", "lang", "expected"),
    [
        ("北京是中国的首都。上海也很大。", "en", ("Chinese characters", "zh")),
        ("北京是中国的首都。", "zh", None),
        ("北京是中国的首都。", "ja", None),
        ("東京は日本の首都です。ひらがなとカタカナ。", "en", ("Japanese kana", "ja")),
        ("ภาษาไทยเขียนติดกัน", "en", ("Thai script", "th")),
        ("The capital of China is Beijing (北京).", "en", None),
        ("Seoul은 한국의 수도입니다", "en", None),  # Korean is written with spaces
        ("", "en", None),
    ],
)
def test_a_script_written_without_spaces_is_named_with_a_language_that_splits_it(
    text, lang, expected
):
    assert unspaced_script(text, lang) == expected
