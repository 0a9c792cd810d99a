from __future__ import annotations

import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.pipeline import Sentencizer

from roberta_static.errors import ConfigError
from roberta_static.text.corpus import split_long
from roberta_static.text.segment import (
    LEXEME_ATTRS,
    TOKENIZER_CACHE_CHUNKS,
    BatchSentencizer,
    Segmenter,
    load_segmenter,
    segment,
)


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


def _words_never_seen(count: int, start: int = 0) -> list[tuple[str, int]]:
    """Lines of words spaCy has not seen (as a dump's numbers, names and typos are)."""
    return [
        (" ".join(f"w{n}x{k}" for k in range(10)) + ". Then the end.", n)
        for n in range(start, start + count)
    ]


def test_a_segmenter_is_loaded_again_past_its_strings_limit_and_segments_alike(monkeypatch):
    monkeypatch.setattr("roberta_static.text.segment.STRINGS_BEFORE_RELOAD", 3_000)
    segmenter, plain = Segmenter("en", None), load_segmenter("en")
    first = segmenter.nlp
    units = _words_never_seen(2_000)
    renewed = [(d.text, c, [s.text for s in d.sents]) for d, c in segment(segmenter, units, 64)]
    alike = [(d.text, c, [s.text for s in d.sents]) for d, c in segment(plain, units, 64)]
    assert renewed == alike
    assert segmenter.nlp is not first
    # At most the limit, and the strings of the one batch read past it.
    assert len(segmenter.nlp.vocab.strings) <= 3_000 + 64 * 12
    assert len(plain.vocab.strings) > 20_000


def test_a_segmenter_starts_from_the_pipeline_it_is_given():
    nlp = load_segmenter("en")
    assert Segmenter("en", None, nlp).nlp is nlp


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


SPACY_NLP = spacy.blank("en")
SPACY_NLP.add_pipe("sentencizer")
_TEXT = st.lists(
    st.sampled_from(
        ["Word", "a", ".", "!", "?", "...", "。", '"', ")", " ", "  ", "\n", "?!", "é"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, max_size=6), st.sampled_from([None, [";", "."]]), st.booleans())
def test_the_batch_sentencizer_sets_the_boundaries_of_spacy_s(texts, punct_chars, preset):
    ours, theirs = BatchSentencizer(punct_chars=punct_chars), Sentencizer(punct_chars=punct_chars)
    ours_docs = [NLP.make_doc(text) for text in texts]
    their_docs = [SPACY_NLP.make_doc(text) for text in texts]
    if preset:  # a start set before is kept, as spaCy's does with overwrite=False
        for doc in ours_docs + their_docs:
            if len(doc) > 1:
                doc[1].is_sent_start = False
    pairs = zip(ours.pipe(ours_docs, batch_size=4), theirs.pipe(their_docs), strict=True)
    for ours_doc, their_doc in pairs:
        assert [t.is_sent_start for t in ours_doc] == [t.is_sent_start for t in their_doc]
    assert [t.is_sent_start for t in ours(NLP.make_doc("One. Two"))] == [True, False, True]


def test_the_default_segmenter_uses_the_batch_sentencizer_and_a_large_tokenizer_cache():
    nlp = load_segmenter("en")
    assert isinstance(nlp.get_pipe("sentencizer"), BatchSentencizer)
    if hasattr(nlp.tokenizer, "max_cache_size"):  # spaCy 3.8; 3.7's cache has no bound
        assert nlp.tokenizer.max_cache_size == TOKENIZER_CACHE_CHUNKS >= 1_000_000


@settings(max_examples=200, deadline=None)
@given(st.one_of(_TEXT, st.text(max_size=100)))
def test_the_segmenter_s_words_carry_the_attributes_the_package_reads(text):
    attributes = list(LEXEME_ATTRS)
    ours, spacys = NLP.make_doc(text), SPACY_NLP.make_doc(text)
    assert ours.to_array(attributes).tolist() == spacys.to_array(attributes).tolist()


def test_only_a_blank_segmenter_skips_the_other_lexeme_attributes(tmp_path):
    assert set(load_segmenter("en").vocab.lex_attr_getters) == set(LEXEME_ATTRS)
    SPACY_NLP.to_disk(tmp_path / "pipeline")
    loaded = load_segmenter("en", str(tmp_path / "pipeline"))
    assert set(loaded.vocab.lex_attr_getters) > set(LEXEME_ATTRS)


def test_a_sentencizer_without_final_characters_keeps_each_doc_one_sentence():
    ours, spacys = BatchSentencizer(), Sentencizer()
    ours.punct_chars = spacys.punct_chars = set()  # the constructor would fall back to defaults
    text = "a. b! c"
    assert [s.text for s in ours(NLP.make_doc(text)).sents] == ["a. b! c"]
    assert [s.text for s in spacys(SPACY_NLP.make_doc(text)).sents] == ["a. b! c"]
