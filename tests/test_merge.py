"""Merging vectors distilled over different texts: vectors/merge.py and StaticVectors.merge."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS_LINES, VOCAB_ENTRIES

from roberta_static import DistillConfig, distill
from roberta_static.errors import VectorsError
from roberta_static.formats.exports import export
from roberta_static.vectors.merge import merge, merge_folders
from roberta_static.vectors.postprocess import PostProcessing, postprocess
from roberta_static.vectors.static import StaticVectors


def write_text(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def halves(roberta_dir, tmp_path_factory):
    """The test corpus in two halves, each distilled with every occurrence; and the whole."""
    folder = tmp_path_factory.mktemp("halves")
    config = DistillConfig(model=str(roberta_dir), layers="1-2", max_contexts=0)
    first = write_text(folder / "first.txt", CORPUS_LINES[:3])
    second = write_text(folder / "second.txt", CORPUS_LINES[3:])
    return {
        "config": config,
        "first": distill(first, VOCAB_ENTRIES, config),
        "second": distill(second, VOCAB_ENTRIES, config),
        "whole": distill([first, second], VOCAB_ENTRIES, config),
    }


def by_word(vectors):
    return {
        word: (vectors[word], int(vectors.counts[row])) for row, word in enumerate(vectors.words)
    }


def test_merging_two_halves_distilled_with_every_occurrence_equals_distilling_the_whole(halves):
    first, second, whole = halves["first"], halves["second"], halves["whole"]
    merged = first.merge(second)
    assert isinstance(merged, StaticVectors)
    got, expected = by_word(merged), by_word(whole)
    assert sorted(got) == sorted(expected)
    # The halves see an entry a different number of times, so an unweighted mean would differ.
    assert any(first.counts[first.get_index(w)] != second.counts[second.get_index(w)]
               for w in set(first.words) & set(second.words))  # fmt: skip
    for word, (vector, count) in expected.items():
        assert got[word][1] == count, word
        np.testing.assert_allclose(got[word][0], vector, rtol=1e-5, atol=1e-6, err_msg=word)
    stats, whole_stats = merged.meta["stats"], whole.meta["stats"]
    assert stats["entries_not_found"] == whole_stats["entries_not_found"] == ["zebra"]
    for key in ("entries", "entries_found", "sentences", "occurrences_used"):
        assert stats[key] == whole_stats[key], key


def test_counts_are_summed_so_an_entry_may_average_more_than_max_contexts(roberta_dir, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=2)
    first = distill(write_text(tmp_path / "a.txt", CORPUS_LINES[:3]), ["cat", "the"], config)
    second = distill(write_text(tmp_path / "b.txt", CORPUS_LINES[3:]), ["cat", "the"], config)
    merged = first.merge(second)
    assert first.counts.tolist() == second.counts.tolist() == [2, 2]
    assert merged.counts.tolist() == [4, 4]
    assert merged.meta["config"]["max_contexts"] == 2


def distilled(words, vectors, counts, **options):
    """Vectors with the metadata distill writes: its options, a corpus, statistics."""
    config = DistillConfig(**{"model": "tiny", "layers": "1", **options})
    meta = {
        "config": config.to_dict(),
        "model": {"name": "tiny", "sha256": "ab" * 32},
        "corpus": [{"path": f"{words[0]}.txt", "bytes": 10}],
        "stats": {"sentences": 3, "seconds": 1.5, "entries_not_found": []},
        "postprocessing": [],
    }
    return StaticVectors(words, np.array(vectors, dtype=np.float32), counts, meta)


def test_entries_are_united_counts_summed_and_vectors_weighted_by_their_counts():
    first = distilled(["cat", "dog", "bird"], [[1, 0], [9, 9], [2, 2]], [1, 0, 0],
                      fill_unseen="decontextualized")  # fmt: skip
    second = distilled(["cat", "dog", "bird", "fish"], [[4, 3], [1, 1], [0, 2], [1, 0]],
                       [3, 2, 0, 5], fill_unseen="decontextualized")  # fmt: skip
    merged = first.merge(second)
    assert merged.words == ["cat", "dog", "bird", "fish"]
    assert merged.counts.tolist() == [4, 2, 0, 5]
    # cat: (1 x [1, 0] + 3 x [4, 3]) / 4; dog: filled in the first, seen in the second, so the
    # second's vector; bird: seen by neither, the mean of the two fills, still count 0.
    assert merged.vectors.tolist() == [[3.25, 2.25], [1, 1], [1, 2], [1, 0]]
    assert merged.meta["stats"]["entries_filled"] == 1 and merged.meta["stats"]["sentences"] == 6


def test_runtime_options_and_the_same_weights_under_another_path_may_differ():
    first = distilled(["cat"], [[1, 0]], [1], device="cpu", batch_tokens=100)
    second = distilled(["dog"], [[0, 1]], [1], device="cuda", batch_tokens=500)
    second.meta["config"]["model"] = second.meta["model"]["name"] = "/moved/tiny"
    assert merge([first, second]).words == ["cat", "dog"]


@pytest.mark.parametrize(
    ("option", "value", "difference"),
    [
        ("model", "bert", "model: {roberta} (weights sha256 {sha}) against {bert} (weights "),
        ("layers", "1", "layers: [1,2] against [1]"),
        ("case", "keep", "case: lower against keep"),
    ],
)
def test_folders_of_another_model_layers_or_case_are_refused_naming_the_difference(
    option, value, difference, halves, roberta_dir, bert_dir, tmp_path
):
    value = str(bert_dir) if option == "model" else value
    config = halves["config"].replace(**{option: value})
    other = distill(write_text(tmp_path / "c.txt", CORPUS_LINES[3:]), VOCAB_ENTRIES, config)
    halves["first"].save(tmp_path / "a")
    other.save(tmp_path / "b")
    with pytest.raises(VectorsError) as refused:
        merge_folders([tmp_path / "a", tmp_path / "b"])
    sha = halves["first"].meta["model"]["sha256"][:12]
    expected = difference.format(roberta=roberta_dir, bert=bert_dir, sha=sha)
    assert str(refused.value).startswith(f"merge: {tmp_path / 'a'} and {tmp_path / 'b'} differ in "
                                         f"{expected}")  # fmt: skip


def test_post_processed_vectors_are_refused_saying_what_to_do_instead():
    first = distilled(["cat"], [[1, 0]], [1])
    centered = postprocess(distilled(["dog"], [[0, 1]], [1]), PostProcessing(center=True))
    with pytest.raises(VectorsError) as refused:
        first.merge(centered)
    assert str(refused.value) == (
        "input 2: post-processed (center), and the mean of post-processed vectors is not "
        "post-processed vectors; merge the folders distill wrote without post-processing, then "
        "post-process the merged one"
    )


def test_vectors_without_distills_metadata_one_input_or_one_given_twice_are_refused(tmp_path):
    first = distilled(["cat"], [[1, 0]], [1])
    bare = StaticVectors(["dog"], np.eye(2)[:1], [1])
    with pytest.raises(VectorsError, match=r"^input 2: its metadata records no config \(meta"):
        first.merge(bare)
    with pytest.raises(VectorsError, match="^merge needs at least two vectors, got 1$"):
        first.merge()
    with pytest.raises(VectorsError, match="^merge: input 1 is given twice \\(also as input 2\\)$"):
        first.merge(first)
    first.save(tmp_path / "a")
    with pytest.raises(VectorsError) as refused:
        merge_folders([tmp_path / "a", tmp_path / "b" / ".." / "a"])
    assert str(refused.value) == (
        f"merge: {tmp_path / 'a'} is given twice (also as {tmp_path / 'b' / '..' / 'a'})"
    )


def test_missing_or_foreign_folders_are_refused_naming_them(tmp_path):
    distilled(["cat"], [[1, 0]], [1]).save(tmp_path / "a")
    (tmp_path / "notes").mkdir()
    with pytest.raises(VectorsError, match=f"^{tmp_path / 'gone'}: no such vectors folder$"):
        merge_folders([tmp_path / "a", tmp_path / "gone"])
    with pytest.raises(VectorsError, match="notes: not a roberta-static vectors folder"):
        merge_folders([tmp_path / "a", tmp_path / "notes"])
    # A file (an export, say) is there: merge says it reads folders, and which one to pass.
    export(tmp_path / "a", ["word2vec"])
    with pytest.raises(VectorsError) as refused:
        merge_folders([tmp_path / "a", tmp_path / "a" / "vectors.txt"])
    assert str(refused.value) == (
        f"{tmp_path / 'a' / 'vectors.txt'}: a file, and merge reads vectors folders only (as "
        "distill writes them: vectors.npy, vocab.tsv, meta.json; exports record no options to "
        f"merge by); pass {tmp_path / 'a'}, the vectors folder it is in"
    )
    (tmp_path / "words.txt").write_text("cat 1 0\n")
    with pytest.raises(VectorsError, match="merge by\\); merge the folders distill wrote instead$"):
        merge_folders([tmp_path / "a", tmp_path / "words.txt"])
    distilled(["cat", "dog"], [[1, 0], [0, 1]], [1, 1]).save(tmp_path / "short")
    (tmp_path / "short" / "vocab.tsv").write_text("cat\t1\n")
    with pytest.raises(VectorsError, match=f"^{tmp_path / 'short'}: 1 words need a "):
        merge_folders([tmp_path / "a", tmp_path / "short"])
    (tmp_path / "short" / "meta.json").write_text("{")
    with pytest.raises(VectorsError, match=f"^{tmp_path / 'short' / 'meta.json'}: cannot read"):
        merge_folders([tmp_path / "a", tmp_path / "short"])


def test_meta_records_every_input_and_the_merged_folder_reads_as_any_other(halves, tmp_path):
    halves["first"].save(tmp_path / "a")
    halves["second"].save(tmp_path / "b")
    merged = StaticVectors.load_merged([tmp_path / "a", tmp_path / "b"])
    merged.save(tmp_path / "c")
    loaded = StaticVectors.load(tmp_path / "c")
    assert loaded.words == merged.words and loaded.counts.tolist() == merged.counts.tolist()
    meta = loaded.meta
    assert meta["format"] == "roberta-static vectors" and meta["postprocessing"] == []
    assert meta["config"] == halves["first"].meta["config"]
    assert meta["corpus"] == halves["first"].meta["corpus"] + halves["second"].meta["corpus"]
    for record, name in zip(meta["merged"], ("first", "second"), strict=True):
        source = halves[name]
        assert record["path"] == str(tmp_path / ("a" if name == "first" else "b"))
        assert record["corpus"] == source.meta["corpus"]
        assert record["model"]["sha256"] == source.meta["model"]["sha256"]
        assert record["occurrences"] == int(source.counts.sum())
        assert record["entries"] == len(source)
        assert record["sentences"] == source.meta["stats"]["sentences"]
    again = merge_folders([tmp_path / "c", tmp_path / "a"])  # a merge's inputs stay recorded
    assert [r["path"] for r in again.meta["merged"][0]["merged"]] == [str(tmp_path / "a"),
                                                                      str(tmp_path / "b")]  # fmt: skip
