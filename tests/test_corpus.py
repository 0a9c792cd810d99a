from __future__ import annotations

import bz2
import codecs
import errno
import gzip
import json
import lzma
import os
import pickle
import re
import tempfile
import unicodedata
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roberta_static.errors import CorpusError
from roberta_static.outputs import CSV_FILE, FINETUNE_FILE, PIPELINE_MARK
from roberta_static.quality.sweep import write_csv
from roberta_static.text.corpus import Corpus, TextCorpus, check_readable, decode
from roberta_static.text.files import OWN_OUTPUT, FileList
from roberta_static.vectors.static import StaticVectors

corpus_module = "roberta_static.text.corpus"


def test_reads_plain_and_compressed_files_in_order(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo\r\n")
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b"three\n"))
    (tmp_path / "c.bz2").write_bytes(bz2.compress(b"four\n"))
    (tmp_path / "d.xz").write_bytes(lzma.compress(b"five"))
    corpus = Corpus([tmp_path / name for name in ("a.txt", "b.txt.gz", "c.bz2", "d.xz")])
    assert list(corpus) == ["one", "two", "three", "four", "five"]
    assert corpus.bytes_read == corpus.total_bytes


def test_folder_is_read_recursively_and_sorted(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("second")
    (tmp_path / "a.txt").write_text("first")
    (tmp_path / ".hidden").write_text("never")
    assert list(Corpus([tmp_path])) == ["first", "second"]


def test_a_folder_lists_its_files_in_path_order_as_it_walks(tmp_path):
    # As strings "a-c" < "a/b" < "a.txt", as paths a/b < a-c < a.txt: the walk sorts each folder
    # and goes into a subfolder where its name falls, never sorting the whole list at the end.
    names = ["a/b", "a/z/y", "a-c", "a.txt", "B", "b", "é", "e", "a/b2/x", "ab/c"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"{name}\n")
    corpus = Corpus([tmp_path])
    assert list(corpus.files) == sorted(tmp_path / name for name in names)
    assert list(corpus) == [str(path.relative_to(tmp_path)) for path in sorted(corpus.files)]


def test_a_file_list_holds_paths_compactly_and_acts_as_a_sequence(tmp_path):
    paths = [f"folder/{number:07}.txt" for number in range(1_000)]
    files = FileList(paths)
    assert (len(files), files[0], files[-1]) == (1_000, Path(paths[0]), Path(paths[-1]))
    assert list(files[10:13]) == [Path(path) for path in paths[10:13]]
    assert pickle.loads(pickle.dumps(files)) == files
    odd = FileList(["a", os.fsdecode(b"caf\xe9/b"), "d e.txt"])  # a name that is not UTF-8
    assert FileList.from_bytes(odd.to_bytes()) == odd and not FileList.from_bytes(b"")
    # A list of Path objects pickles at about three times the names' bytes.
    assert len(pickle.dumps(files)) < sum(map(len, paths)) + 9 * len(paths)
    with pytest.raises(IndexError):
        files[1_000]


def test_resolved_files_are_what_path_resolve_gives(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.txt").write_text("a\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real" / "a.txt")
    (tmp_path / "folder").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path / "real")
    names = ["a.txt", "./a.txt", "../link.txt", "../folder/a.txt", "../real/../folder/a.txt"]
    assert list(FileList(names).resolved()) == [Path(name).resolve() for name in names]


def test_jsonl_field(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"body": "hello"}) + "\n\n" + json.dumps({"body": "world"}) + "\n")
    assert list(Corpus([path], text_field="body")) == ["hello", "world"]


def test_jsonl_errors_name_file_and_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "ok"}\n{"other": 1}\n')
    with pytest.raises(CorpusError, match=r"docs.jsonl:2: no string field 'text'"):
        list(Corpus([path]))
    path.write_text("{broken\n")
    with pytest.raises(CorpusError, match=r"docs.jsonl:1: not valid JSON"):
        list(Corpus([path]))
    path.write_text('{"text": "unterminated\n')
    with pytest.raises(CorpusError) as caught:
        list(Corpus([path]))
    assert str(caught.value).endswith("(Unterminated string starting at column 10)")


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"caf\xe9 ok\n\xff\xfegood\n")
    corpus = Corpus([path])
    assert list(corpus) == ["caf\ufffd ok", "\ufffd\ufffdgood"]
    assert corpus.bad_bytes == 3


_DATA = "".join(f"line {i} of a corpus that compresses\n" for i in range(400)).encode()
_GZ = gzip.compress(_DATA)
# Compressed corpus files cut short or not what their suffix says, and the error expected.
DAMAGED = {
    "truncated gz": ("cut.txt.gz", _GZ[: len(_GZ) // 2], "truncated gzip file (ended before its end marker)"),
    "truncated bz2": ("cut.txt.bz2", bz2.compress(_DATA)[:-60], "truncated bzip2 file"),
    "truncated xz": ("cut.txt.xz", lzma.compress(_DATA)[:-60], "truncated xz file"),
    "not gzip": ("plain.txt.gz", b"hello world\n", "not valid gzip data (Not a gzipped file"),
    "damaged gzip": ("bad.txt.gz", _GZ[:12] + bytes(64) + _GZ[76:], "not valid gzip data ("),
    "junk bz2": ("junk.txt.bz2", b"BZh9" + bytes(range(256)), "not valid bzip2 data ("),
    "junk xz": ("junk.txt.xz", b"\xfd7zXZ\x00" + b"junk" * 40, "not valid xz data ("),
}  # fmt: skip


def write_damaged(folder: Path, case: str) -> tuple[Path, str]:
    """Write one of the ``DAMAGED`` files into ``folder``; returns its path and expected error."""
    name, content, message = DAMAGED[case]
    (folder / name).write_bytes(content)
    return folder / name, message


@pytest.mark.parametrize("case", DAMAGED)
def test_damaged_compressed_file_is_one_corpus_error_naming_it(tmp_path, case):
    path, message = write_damaged(tmp_path, case)
    with pytest.raises(CorpusError) as caught:
        list(Corpus([path]))
    assert str(caught.value).startswith(f"{path}: {message}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("case", DAMAGED)
def test_the_check_before_a_run_finds_each_damaged_file_as_the_run_would(tmp_path, case):
    # A cut-short file's first block reads well: only its end shows the damage.
    path, message = write_damaged(tmp_path, case)
    with pytest.raises(CorpusError) as caught:
        check_readable([path])
    assert str(caught.value).startswith(f"{path}: {message}")


def test_the_check_before_a_run_says_a_corpus_of_binary_files_was_skipped_as_binary(tmp_path):
    binary, empty, text = tmp_path / "data.bin", tmp_path / "empty.txt", tmp_path / "a.txt"
    binary.write_bytes(b"\x00\x01\x02binary\x00")
    gzipped = tmp_path / "data.bin.gz"
    gzipped.write_bytes(gzip.compress(b"\x00\x01 binary"))
    empty.write_bytes(b"")
    text.write_text("words\n")
    with pytest.raises(CorpusError) as caught:
        check_readable([binary])
    assert str(caught.value) == (
        f"{binary}: skipped as binary (it holds NUL bytes), so the corpus holds no text"
    )
    with pytest.raises(CorpusError) as caught:
        check_readable([binary, gzipped, empty])
    assert str(caught.value) == (
        f"3 corpus files: no text to read (skipped as binary, holding NUL bytes: {binary}, "
        f"{gzipped}; empty: {empty})"
    )
    with pytest.raises(CorpusError, match="corpus holds no text$"):
        check_readable([empty])
    # A folder of empty files, or of blank lines: the message names them (and so the folder).
    more = [tmp_path / f"blank-{n}.txt" for n in range(4)]
    for path in more:
        path.write_bytes(b"\n  \r\n\t\n")
    with pytest.raises(CorpusError) as caught:
        check_readable([empty, *more])
    assert str(caught.value) == (
        f"{empty}, {more[0]}, {more[1]} and 2 more: corpus holds no text "
        "(every file is empty or blank)"
    )
    check_readable([*more, text])  # one file with a word is enough
    check_readable([binary, text])  # the run skips the binary file and reads the other


def test_the_check_before_a_run_opens_plain_files_only_until_one_holds_text(tmp_path, monkeypatch):
    import roberta_static.text.corpus as corpus_module

    opened = []
    first_block = corpus_module._checked_first_block.__wrapped__

    def counted(path, size, mtime_ns):
        opened.append(path.name)
        return first_block(path, size, mtime_ns)

    monkeypatch.setattr(corpus_module, "_checked_first_block", counted)
    empty, text = tmp_path / "0-empty.txt", tmp_path / "1-text.txt"
    empty.write_bytes(b"")
    text.write_text("words\n")
    plain = [tmp_path / f"2-{number}.txt" for number in range(20)]
    for path in plain:
        path.write_text("more words\n")
    check_readable([empty, text, *plain])
    assert opened == ["0-empty.txt", "1-text.txt"]
    # After the text, a compressed file is still read to its end, and a missing file is named.
    cut = tmp_path / "3-cut.txt.gz"
    cut.write_bytes(gzip.compress(b"words\n" * 100)[:-12])
    with pytest.raises(CorpusError, match="3-cut.txt.gz: truncated gzip"):
        check_readable([text, *plain, cut])
    with pytest.raises(CorpusError, match="gone.txt: cannot read"):
        check_readable([text, tmp_path / "gone.txt"])


@pytest.mark.parametrize("name", ["text.txt", "text.txt.gz", "docs.jsonl"])
def test_byte_order_mark_is_dropped_text_is_nfc_and_resume_still_exact(tmp_path, name):
    lines = ["cafe\u0301 au lait", "second line", "Cafe\u0301"]
    if name.endswith(".jsonl"):
        lines = [json.dumps({"text": line}) for line in lines]
    data = codecs.BOM_UTF8 + "\n".join(lines).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    corpus = Corpus([path])
    units = list(corpus.units())
    texts = ["caf\u00e9 au lait", "second line", "Caf\u00e9"]
    assert [text for text, _ in units] == texts and corpus.bad_bytes == 0
    for cut in range(len(units)):
        assert [text for text, _ in corpus.units(units[cut][1])] == texts[cut + 1 :]


def test_decode_matches_python_replace():
    data = b"a\xc3(b\xe2\x82c\xf0\x9f\x98\x80"
    text, bad = decode(data)
    assert text == data.decode("utf-8", errors="replace")
    assert bad == 3


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(CorpusError, match="no such file or folder"):
        Corpus([tmp_path / "missing.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="folder holds no files"):
        Corpus([tmp_path / "empty"])


def test_binary_files_are_skipped_and_listed(tmp_path):
    (tmp_path / "a.txt").write_text("words here\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\x01\x02binary\x00")
    corpus = Corpus([tmp_path])
    assert list(corpus) == ["words here"]
    assert corpus.binary_files == [tmp_path / "b.bin"]


def test_a_long_line_without_newline_comes_in_bounded_pieces(tmp_path):
    from roberta_static.text.corpus import MAX_UNIT_BYTES

    text = " ".join(f"wörd{i}" for i in range(400_000))  # about 3.6 MB, no newline
    path = tmp_path / "long.txt"
    path.write_text(text, encoding="utf-8")
    corpus = Corpus([path])
    pieces = list(corpus)
    assert len(pieces) > 30 and all(len(p.encode()) <= MAX_UNIT_BYTES for p in pieces)
    assert "".join(pieces) == text and corpus.bad_bytes == 0
    assert corpus.lines_cut == 1  # one line, however many units


def test_lines_cut_are_counted_once_each_and_once_across_a_resume(tmp_path):
    long = " ".join(f"w{i}" for i in range(60_000))  # about 400 kB: several units
    path = tmp_path / "mixed.txt"
    path.write_text(f"short one\n{long}\nshort two\n{long}\nlast\n", encoding="utf-8")
    corpus = Corpus([path])
    counted = [(position, corpus.lines_cut) for _, position in corpus.units()]
    assert len(counted) > 8 and counted[-1][1] == 2
    # Resumed after any unit, the lines cut from there on and those before add up to the whole.
    for position, before in counted:
        rest = Corpus([path])
        list(rest.units(position))
        assert before + rest.lines_cut == 2, position


def test_texts_and_jsonl_fields_too_long_for_a_unit_count_as_cut(tmp_path):
    import json

    long = " ".join(f"w{i}" for i in range(30_000))
    texts = TextCorpus(["short", long])
    assert len(list(texts)) > 2 and texts.lines_cut == 1
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": long}) + "\n" + json.dumps({"text": "short"}) + "\n")
    corpus = Corpus([path])
    assert len(list(corpus)) > 2 and corpus.lines_cut == 1


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
def test_units_resume_after_a_position(tmp_path, name):
    lines = [f"line {i}" for i in range(50)]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    other = tmp_path / "z.txt"
    other.write_text("last file\n")
    corpus = Corpus([path, other])
    units = list(corpus.units())
    assert [text for text, _ in units] == [*lines, "last file"]
    for cut in (0, 17, 49):
        resumed = [text for text, _ in corpus.units(units[cut][1])]
        assert resumed == [*lines[cut + 1 :], "last file"]


def test_mixed_and_lone_cr_newlines_end_lines_and_resume(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"alpha one\r\nbeta two\rgamma three\r\rdelta\nepsilon\r")
    corpus = Corpus([path])
    units = list(corpus.units())
    texts = ["alpha one", "beta two", "gamma three", "delta", "epsilon"]
    assert [text for text, _ in units] == texts
    for cut in range(len(units)):
        assert [text for text, _ in corpus.units(units[cut][1])] == texts[cut + 1 :]


def expected_units(data: bytes) -> list[str]:
    """Lines of the file as Python splits them on LF, CRLF and lone CR, blanks dropped; in NFC."""
    text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
    lines = re.split(r"\r\n|\r|\n", text)
    return [unicodedata.normalize("NFC", line) for line in lines if line.strip()]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=400),
        st.lists(st.text(max_size=30), max_size=12).map(lambda ls: "\n".join(ls).encode()),
        st.lists(st.sampled_from([b"ab", b" ", b"\r", b"\n", b"\xe9", b"\xf0\x9f\x98\x80", b"\0"]),
                 max_size=60).map(b"".join),
    )
)  # fmt: skip
def test_any_bytes_read_as_their_lines_and_resume_from_every_unit(data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.txt"
        path.write_bytes(data)
        corpus = Corpus([path])
        units = list(corpus.units())
        if b"\0" in data:
            assert units == [] and corpus.binary_files == [path]
            return
        texts = [text for text, _ in units]
        assert texts == expected_units(data)
        assert corpus.bad_bytes == len(data) - len(data.decode("utf-8", errors="ignore").encode())
        for cut, (_, position) in enumerate(units):
            assert [text for text, _ in corpus.units(position)] == texts[cut + 1 :]


@settings(max_examples=100, deadline=None)
@given(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\0"), min_size=1, max_size=300
    )
)
def test_long_lines_come_in_bounded_pieces_that_keep_every_character(text):
    with tempfile.TemporaryDirectory() as folder, mock.patch(f"{corpus_module}.MAX_UNIT_BYTES", 16):
        path = Path(folder) / "long.txt"
        path.write_text(text.replace("\n", " ").replace("\r", " "), encoding="utf-8")
        units = list(Corpus([path]).units())
        # Cuts fall between characters, so the pieces put back together are the line (each piece
        # in NFC, which can grow UTF-8 text at most 3x: Unicode UAX #15, section 9).
        kept = unicodedata.normalize("NFC", "".join(text for text, _ in units))
        assert kept.split() == unicodedata.normalize("NFC", text).split()
        assert all(len(piece.encode()) <= 3 * 16 for piece, _ in units)


def test_texts_in_memory_are_units_read_lazily():
    from roberta_static.text.corpus import TextCorpus

    read = []

    def texts():
        for text in ["one", "  ", "two\nlines", "x" * 250_000]:
            read.append(text)
            yield text

    corpus = TextCorpus(texts())
    units = corpus.units()
    assert next(units)[0] == "one" and len(read) == 1
    rest = [text for text, _ in units]
    assert rest[0] == "two\nlines" and "".join(rest[1:]) == "x" * 250_000
    assert max(len(text) for text in rest) <= 100_000
    assert corpus.bytes_read == 3 + 2 + 9 + 250_000
    with pytest.raises(CorpusError, match="a generator can be read only once"):
        list(corpus)
    assert list(TextCorpus(["a", "b"])) == list(TextCorpus(["a", "b"])) == ["a", "b"]
    with pytest.raises(CorpusError, match="got a single string"):
        TextCorpus("The cat sat.")


def own_outputs(folder):
    """One folder of each kind roberta-static writes, inside ``folder``, all holding text."""
    StaticVectors(["cat"], np.ones((1, 2)), np.array([1])).save(folder / "vectors")
    (folder / "model").mkdir()
    (folder / "model" / FINETUNE_FILE).write_text("{}")
    (folder / "model" / "vocab.txt").write_text("cat\ndog\n")
    (folder / "sweep").mkdir()
    write_csv([], folder / "sweep" / CSV_FILE)
    (folder / "sub" / "pipeline").mkdir(parents=True)
    (folder / "sub" / "pipeline" / "meta.json").write_text(json.dumps({PIPELINE_MARK: {}}))
    return [folder / "sub" / "pipeline", folder / "model", folder / "sweep", folder / "vectors"]


def test_folders_roberta_static_wrote_are_never_read_as_corpus(tmp_path):
    (tmp_path / "a.txt").write_text("words here\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("more words\n")
    outputs = own_outputs(tmp_path)
    corpus = Corpus([tmp_path])
    assert list(corpus) == ["words here", "more words"]
    assert corpus.skipped == {path: OWN_OUTPUT for path in sorted(outputs)}
    with pytest.raises(CorpusError, match="vectors: is a folder roberta-static wrote, not a"):
        Corpus([tmp_path / "vectors"])
    assert list(Corpus([tmp_path / "vectors" / "vocab.tsv"])) == ["cat\t1"]  # named: read


def test_pipes_devices_and_links_in_a_folder_are_skipped_and_named(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("words here\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("linked words\n")
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path="."):
        if Path(path) == tmp_path / "locked":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)  # root reads any folder, whatever its mode
    corpus = Corpus([tmp_path])
    assert list(corpus) == ["words here", "linked words"]
    assert corpus.skipped == {
        tmp_path / "dangling": "a broken symbolic link to nowhere",
        tmp_path / "fifo": "a pipe",
        tmp_path / "linked": "a symbolic link to a folder, not followed",
        tmp_path / "locked": "an unreadable folder (Permission denied)",
    }


def test_a_pipe_or_standard_input_as_corpus_is_refused_saying_why(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "only").mkdir()
    os.mkfifo(tmp_path / "only" / "fifo")
    again = "corpus files are read more than once (checked, resumed, split among workers), "
    for path, message in (
        (tmp_path / "fifo", f"{tmp_path / 'fifo'}: is a pipe, not a file; {again}"),
        (Path("-"), f"-: standard input cannot be a corpus; {again}"),
        (tmp_path / "dangling", f"{tmp_path / 'dangling'}: is a broken symbolic link to nowhere"),
        (tmp_path / "only", f"{tmp_path / 'only'}: folder holds no files to read (not read: "),
    ):
        with pytest.raises(CorpusError) as caught:
            Corpus([path])
        assert str(caught.value).startswith(message)
