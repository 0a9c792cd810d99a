"""What a finished run tells: the notebook API warns what the command line's summary says."""

from __future__ import annotations

import warnings

import pytest
from conftest import CORPUS_LINES
from typer.testing import CliRunner

from roberta_static import DistillConfig, RobertaStaticWarning, VocabError, distill
from roberta_static.cli import app
from roberta_static.notices import language_warning

CHINESE = ["北京是中国的首都。", "上海是中国最大的城市。", "北京和上海都很大。"] * 3
CHINESE_ENTRIES = ["北京", "中国", "上海", "城市"]


def warned(**kwargs) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vectors = distill(**kwargs)
    texts = [str(w.message) for w in caught if issubclass(w.category, RobertaStaticWarning)]
    assert all(w.filename == __file__ for w in caught if w.category is RobertaStaticWarning)
    return vectors, texts


def test_the_notebook_api_warns_of_entries_not_found_and_repeated(roberta_dir):
    config = DistillConfig(model=str(roberta_dir), layers="1")
    vectors, texts = warned(
        texts=CORPUS_LINES, vocab=["cat", "dog", "zebraquux", "cat", ""], config=config
    )
    assert vectors.words == ["cat", "dog"]
    assert texts == [
        "not found in the corpus (1): zebraquux (all in vectors.meta['stats'])",
        "vocabulary: 1 duplicate entries and 1 blank lines skipped",
    ]
    _, texts = warned(texts=CORPUS_LINES, vocab=["cat", "dog"], config=config)
    assert texts == []


def test_chinese_entries_with_lang_en_get_the_hint_lang_zh(roberta_dir, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1", fill_unseen="decontextualized")
    _, texts = warned(texts=CHINESE, vocab=CHINESE_ENTRIES, config=config)
    hint = (
        "4 of 4 entries not found; the corpus is written in Chinese characters, without spaces "
        "between words, which lang='en' does not split into words: try lang='zh'"
    )
    assert texts[-1] == hint
    found, texts = warned(texts=CHINESE, vocab=CHINESE_ENTRIES, config=config.replace(lang="zh"))
    assert texts == [] and found.meta["stats"]["entries_found"] == 4

    corpus, vocab = tmp_path / "zh.txt", tmp_path / "zh_vocab.txt"
    corpus.write_text("\n".join(CHINESE) + "\n", encoding="utf-8")
    vocab.write_text("\n".join(CHINESE_ENTRIES) + "\n", encoding="utf-8")
    args = ["distill", str(corpus), "--vocab", str(vocab), "-m", str(roberta_dir), "-l", "1",
            "--fill-unseen", "decontextualized", "-q"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 0 and result.output == (
        "warning: 4 of 4 entries not found; the corpus is written in Chinese characters, without "
        "spaces between words, which --lang en does not split into words: try --lang zh\n"
    )
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "zh"), "--lang", "zh"])
    assert result.exit_code == 0 and result.output == ""


def test_a_run_that_finds_no_entry_gives_the_hint_in_its_error(roberta_dir):
    config = DistillConfig(model=str(roberta_dir), layers="1")
    with pytest.raises(VocabError) as caught:
        distill(texts=CHINESE, vocab=CHINESE_ENTRIES, config=config)
    assert str(caught.value) == (
        "none of the 4 vocabulary entries occurs in the corpus (the corpus is written in Chinese "
        "characters, without spaces between words, which --lang en does not split into words: "
        "try --lang zh)"
    )


@pytest.mark.parametrize(
    ("missing", "config", "expected"),
    [
        (3, {"lang": "en"}, True),
        (2, {"lang": "en"}, False),  # half found: the tokenizer does split the text
        (4, {"lang": "zh"}, False),
        (4, {"lang": "en", "spacy_model": "zh_core_web_sm"}, False),
    ],
)
def test_the_language_hint_needs_most_entries_missing_and_a_script_the_language_cannot_split(
    missing, config, expected
):
    stats = {"entries": 4, "entries_not_found": CHINESE_ENTRIES[:missing]}
    assert (language_warning(stats, config, iter(CHINESE)) is not None) == expected
