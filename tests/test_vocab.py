from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc

from roberta_static.errors import VocabError
from roberta_static.text.segment import load_segmenter, segment
from roberta_static.text.vocab import VocabMatcher, VocabPatterns, Vocabulary


def test_file_skips_blanks_and_duplicates(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("  Cat \n\ncat\nNew   York\nnew york\n日本\n🙂\n", encoding="utf-8")
    vocab = Vocabulary.from_file(path)
    assert vocab.entries == ["cat", "new york", "日本", "🙂"]
    assert (vocab.duplicates, vocab.blank_lines) == (2, 1)
    assert Vocabulary.from_file(path, case="keep").entries == [
        "Cat",
        "cat",
        "New York",
        "new york",
        "日本",
        "🙂",
    ]


def test_byte_order_mark_is_dropped_and_entries_are_nfc(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeffcat\ncafe\u0301\ncaf\u00e9\n".encode())
    vocab = Vocabulary.from_file(path)
    assert vocab.entries == ["cat", "caf\u00e9"] and vocab.duplicates == 1


def test_vocabulary_from_corpus_counts_both_unicode_forms_as_one_entry():
    nlp = load_segmenter("en")
    texts = ["cafe\u0301 and caf\u00e9", "Cafe\u0301"]
    vocab = Vocabulary.from_corpus(nlp, texts, case="lower", min_count=3, max_vocab=None)
    assert vocab.entries == ["caf\u00e9"]


def test_file_errors(tmp_path):
    with pytest.raises(VocabError, match="not found"):
        Vocabulary.from_file(tmp_path / "missing.txt")
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(VocabError, match="vocabulary is empty"):
        Vocabulary.from_file(tmp_path / "blank.txt")
    (tmp_path / "tabs.txt").write_text("ok\nbad\tentry\n")
    with pytest.raises(VocabError, match=r"tabs.txt:2: tab inside an entry"):
        Vocabulary.from_file(tmp_path / "tabs.txt")


def matches(text, entries, case="lower"):
    nlp = load_segmenter("en")
    matcher = VocabMatcher.of(nlp, Vocabulary.from_entries(entries, case))
    return [
        (sentence.text, [(sentence.text[s:e], entry) for s, e, entry in sentence.spans])
        for doc, _ in segment(nlp, [(text, None)])
        for sentence in matcher(doc)
    ]


def test_matches_words_phrases_and_repeats_per_sentence():
    found = matches(
        "New York is big. I love new york and NEW YORK, not york.", ["new york", "york"]
    )
    assert found == [
        ("New York is big.", [("New York", 0), ("York", 1)]),
        (
            "I love new york and NEW YORK, not york.",
            [("new york", 0), ("york", 1), ("NEW YORK", 0), ("YORK", 1), ("york", 1)],
        ),
    ]


def test_case_keep_is_exact():
    found = matches("Paris and paris.", ["Paris"], case="keep")
    assert found == [("Paris and paris.", [("Paris", 0)])]


def test_entries_split_by_spacy_still_match():
    found = matches("They don't know.", ["don't"])
    assert found == [("They don't know.", [("don't", 0)])]


def test_entries_tokenized_differently_alone_still_match():
    found = matches("She moved to the U.S. in May. We've seen it.", ["u.s.", "'ve"])
    assert found == [
        ("She moved to the U.S. in May.", [("U.S.", 0)]),
        ("We've seen it.", [("'ve", 1)]),
    ]


NLP = load_segmenter("en")


def phrase_matcher(vocab):
    """spaCy's PhraseMatcher over each entry as tokenized alone, and as one token when it has no
    space: the occurrences VocabMatcher finds, the way spaCy's documentation builds them."""
    matcher = PhraseMatcher(NLP.vocab, attr="LOWER" if vocab.case == "lower" else "ORTH")
    for entry_id, entry in enumerate(vocab.entries):
        alone = NLP.make_doc(entry)
        one_token = [Doc(NLP.vocab, words=[entry])] if " " not in entry and len(alone) > 1 else []
        matcher.add(f"entry:{entry_id}", [alone, *one_token])
    return matcher


def spans_from_tokens(doc, vocab):
    """Each sentence's occurrences read off PhraseMatcher's matches, Span and Token objects."""
    entry_of = {NLP.vocab.strings[f"entry:{i}"]: i for i in range(len(vocab))}
    matches = phrase_matcher(vocab)(doc)
    found = []
    for sent in doc.sents:
        spans = [
            (
                doc[start].idx - sent.start_char,
                doc[end - 1].idx + len(doc[end - 1]) - sent.start_char,
                entry_of[key],
            )
            for key, start, end in matches
            if sent.start <= start and end <= sent.end
        ]
        found.append(sorted(spans))
    return found


_SENTENCES = st.lists(
    st.sampled_from(["Cat", "cat", "new", "York", ".", "!", " ", "  ", "\n", "U.S.", "'s", "é"]),
    max_size=40,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), _SENTENCES), st.data())
def test_matches_in_any_text_lie_inside_their_sentence(text, data):
    words = text.split()
    # Runs of words too: a phrase may cross a sentence boundary, and then is no occurrence.
    runs = [" ".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words))]
    picked = data.draw(st.lists(st.sampled_from(runs), max_size=4)) if words else []
    extra = data.draw(st.lists(st.text(min_size=1, max_size=8), max_size=2))
    vocab = Vocabulary.from_entries(picked + extra, data.draw(st.sampled_from(["lower", "keep"])))
    if not vocab.entries:
        return
    ((doc, _),) = segment(NLP, [(text, None)])
    matcher = VocabMatcher.of(NLP, vocab)
    sentences = list(matcher(doc))
    assert [s.text for s in sentences] == [s.text for s in doc.sents]
    assert [(s.text, s.spans) for s in matcher(doc, text)] == [(s.text, s.spans) for s in sentences]
    assert [s.spans for s in sentences] == spans_from_tokens(doc, vocab)
    for sentence in sentences:
        assert sentence.spans == sorted(sentence.spans)
        for start, end, entry_id in sentence.spans:
            assert 0 <= start < end <= len(sentence.text)
            assert 0 <= entry_id < len(vocab)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["ab", "ba", "abc", "b", "AB"]), min_size=1, max_size=30), st.data()
)
def test_every_occurrence_of_a_word_is_found_once(words, data):
    entries = data.draw(st.lists(st.sampled_from(["ab", "ba", "abc", "b", "ab ba"]), min_size=1))
    vocab = Vocabulary.from_entries(entries)
    text = " ".join(words)
    ((doc, _),) = segment(NLP, [(text, None)])
    (sentence,) = VocabMatcher.of(NLP, vocab)(doc)
    found = [
        (sentence.text[start:end].lower(), vocab.entries[i]) for start, end, i in sentence.spans
    ]
    assert all(matched == entry for matched, entry in found)
    lowered = [w.lower() for w in words]
    for entry in vocab.entries:
        parts = entry.split()
        expected = sum(lowered[i : i + len(parts)] == parts for i in range(len(lowered)))
        assert sum(e == entry for _, e in found) == expected


def test_sentences_from_a_components_hook_are_the_matchers_sentences():
    doc = NLP("New York is big. I love york")
    doc.user_hooks["sents"] = lambda d: (d[i : i + 2] for i in range(0, len(d), 2))
    matcher = VocabMatcher.of(NLP, Vocabulary.from_entries(["new york", "york"]))
    assert [(s.text, s.spans) for s in matcher(doc)] == [
        ("New York", [(0, 8, 0), (4, 8, 1)]),
        ("is big", []),
        (". I", []),
        ("love york", [(5, 9, 1)]),
    ]


@pytest.mark.parametrize(
    "content,line", [(b"\0" * 64, 1), (b"cat\ndog\n\0\0\0\n", 3), (b"\xff\xfec\0a\0t\0", 1)]
)
def test_a_binary_vocabulary_is_refused_naming_the_file(tmp_path, content, line):
    path = tmp_path / "vocab.bin"
    path.write_bytes(content)
    with pytest.raises(VocabError, match=rf"vocab.bin:{line}: NUL byte: a binary file"):
        Vocabulary.from_file(path)


def test_patterns_built_with_one_pipeline_match_the_docs_of_another():
    """As a worker's: its own pipeline, which never saw the entries, and the driver's patterns."""
    vocab = Vocabulary.from_entries(["u.s.", "u.s .", "u.s", "new york", "new york city", "york"])
    patterns = VocabPatterns.of(load_segmenter("en"), vocab)
    ((doc, _),) = segment(NLP, [("I saw New York City and the U.S. today.", None)])
    (sentence,) = VocabMatcher(patterns)(doc)
    assert [sentence.spans] == spans_from_tokens(doc, vocab)
    found = [(sentence.text[start:end], vocab.entries[i]) for start, end, i in sentence.spans]
    assert ("New York City", "new york city") in found and ("New York", "new york") in found
    assert ("U.S.", "u.s.") in found


def test_entries_that_match_the_same_word_each_match_it():
    vocab = Vocabulary(["ab", "AB", "cd"], case="lower")  # built directly: no folding
    ((doc, _),) = segment(NLP, [("Ab cd ab.", None)])
    (sentence,) = VocabMatcher.of(NLP, vocab)(doc)
    assert sentence.spans == [(0, 2, 0), (0, 2, 1), (3, 5, 2), (6, 8, 0), (6, 8, 1)]
    assert [sentence.spans] == spans_from_tokens(doc, vocab)


def test_a_matcher_of_no_entries_finds_nothing():
    ((doc, _),) = segment(NLP, [("Nothing to find here.", None)])
    (sentence,) = VocabMatcher.of(NLP, Vocabulary([], "lower"))(doc)
    assert sentence.spans == []
