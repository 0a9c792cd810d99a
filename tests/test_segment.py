from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roberta_static.corpus import split_long
from roberta_static.errors import ConfigError
from roberta_static.segment import load_segmenter, segment


def test_long_units_are_cut_at_spaces_and_keep_every_character():
    text = " ".join(f"word{i}" for i in range(40_000))
    pieces = list(split_long(text, limit=10_000))
    assert "".join(pieces) == text
    assert all(len(p) <= 10_000 for p in pieces)
    assert all(p.endswith(" ") for p in pieces[:-1])
    assert list(split_long("x" * 25, limit=10)) == ["x" * 10, "x" * 10, "x" * 5]


def test_sentences_and_word_offsets():
    nlp = load_segmenter("en")
    ((doc, context),) = segment(nlp, [("Hello there. It works!", 7)])
    assert context == 7
    assert [s.text for s in doc.sents] == ["Hello there.", "It works!"]
    assert [(t.text, t.idx) for t in doc][:3] == [("Hello", 0), ("there", 6), (".", 11)]


def test_unknown_language_and_pipeline():
    with pytest.raises(ConfigError, match="lang: spaCy has no language 'xx-nope'"):
        load_segmenter("xx-nope")
    with pytest.raises(ConfigError, match="spacy_model: cannot load 'no_such_pipeline'"):
        load_segmenter("en", "no_such_pipeline")


NLP = load_segmenter("en")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=5))
def test_any_text_segments_into_sentences_that_hold_their_tokens(texts):
    units = [(text, number) for number, text in enumerate(texts)]
    docs = list(segment(NLP, units, batch_chars=100))  # small batches: texts cross their bounds
    assert [number for _, number in docs] == list(range(len(texts)))
    for (doc, _), text in zip(docs, texts, strict=True):
        assert doc.text == text
        for sent in doc.sents:
            assert 0 <= sent.start_char <= sent.end_char <= len(text)
            assert text[sent.start_char : sent.end_char] == sent.text
            for token in sent:
                assert sent.start_char <= token.idx <= token.idx + len(token) <= sent.end_char
