"""Command-line options: checked before heavy imports, errors naming flags, `--help`, `--version`."""

from __future__ import annotations

import bz2
import gzip
import inspect
import lzma
import re
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

import roberta_static
from roberta_static.cli import COMMANDS, app
from roberta_static.formats.exports import export
from roberta_static.vectors.static import StaticVectors

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
OPTION_ROW = re.compile(r"\W*(--[a-z][a-z-]*)")  # a row of --help's options table


def run(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def flags_of(command: str) -> set[str]:
    """Every flag Typer declares for ``command``."""
    declared = typer.main.get_command(app).commands[command]
    return {name for param in declared.params for name in param.opts if name.startswith("--")}


def declared_options(command: str) -> list[tuple[str, str, typer.models.OptionInfo]]:
    """(parameter name, long flag, declaration) of each option, as the command's function has it."""
    found = []
    for name, parameter in inspect.signature(COMMANDS[command]).parameters.items():
        option = parameter.default
        if isinstance(option, typer.models.OptionInfo):
            long = [d for d in option.param_decls if d.startswith("--")]
            found.append((name, long[0] if long else "--" + name.replace("_", "-"), option))
    return found


def options_of(command: str) -> dict[str, typer.models.OptionInfo]:
    return {flag: option for _, flag, option in declared_options(command)}


def one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("error: "), (
        result.output
    )
    return lines[0]


# Positional arguments (and required options) that let each command reach its option checks.
REQUIRED = {
    "distill": lambda out: ["corpus.txt", "--model", "m", "--out", out],
    "finetune": lambda out: ["corpus.txt", "--model", "m", "--out", out],
    "sweep": lambda out: ["corpus.txt", "--model", "m", "--out", out],
    "similar": lambda out: [out, "word"],
    "postprocess": lambda out: ["vectors", out],
    "export": lambda out: [out],
    "tune": lambda out: ["vectors", "--out", out],
}


def numeric_options() -> list[tuple[str, str]]:
    found = []
    for command, function in COMMANDS.items():
        hints = typing.get_type_hints(function)
        for name, flag, _ in declared_options(command):
            if {int, float} & set(typing.get_args(hints[name]) or (hints[name],)):
                found.append((command, flag))
    return found


def test_the_numeric_options_are_found():
    assert {("similar", "--topn"), ("distill", "--max-contexts"), ("postprocess", "--pca")} <= set(
        numeric_options()
    )


@pytest.mark.parametrize("command,flag", numeric_options())
def test_every_numeric_option_rejects_values_below_its_minimum(command, flag, tmp_path):
    option = options_of(command)[flag]
    # Without min=, a callback checks an open lower bound (> 0), which Typer cannot declare.
    open_bound = option.min is None and option.callback is not None
    assert option.min is not None or open_bound, (
        f"{command} {flag}: numeric option without a minimum"
    )
    out = tmp_path / "out"
    result = run(command, *REQUIRED[command](out), flag, 0 if open_bound else option.min - 1)
    line = one_error_line(result)
    assert flag in line and not out.exists()


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5"])
def test_workers_is_a_count_or_auto_and_anything_else_a_usage_error(value, tmp_path):
    out = tmp_path / "out"
    result = run("distill", *REQUIRED["distill"](out), "--workers", value)
    assert result.exit_code == 2
    assert "--workers" in one_error_line(result) and not out.exists()


def test_similar_rejects_a_non_positive_count(tmp_path):
    StaticVectors(["a", "b"], np.eye(2, dtype=np.float32), np.array([1, 1])).save(tmp_path / "v")
    for value in ("-3", "0"):
        assert "--topn" in one_error_line(run("similar", tmp_path / "v", "a", "-n", value))
    assert run("similar", tmp_path / "v", "a", "-n", "1").output.strip().endswith("\tb")


BAD_OPTIONS = {
    # Typer's own range check, before the command runs
    "--max-contexts": (["--max-contexts", "-3"], "--max-contexts"),
    # DistillConfig's checks, reported with the flag instead of the field
    "--layers": (["--layers", "3-1"], "error: --layers: range '3-1' must go upwards"),
    "--batch-tokens": (
        ["--batch-tokens", "100", "--max-length", "200"],
        "error: --batch-tokens: must hold one sequence of the longest input (200 tokens), got 100",
    ),
    "--formats": (["--formats", "kv,glove"], "error: --formats: unknown ['glove']"),
    "--quantize": (
        ["--quantize", "int8", "--dtype", "bfloat16"],
        "error: --quantize: int8 layers take float32 inputs; use dtype float32 or auto",
    ),
}

PROBE = """
import sys
from roberta_static.cli import app
try:
    app(sys.argv[1:], prog_name="roberta-static")
finally:
    print(sorted(m for m in ("torch", "transformers", "spacy") if m in sys.modules))
"""


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_bad_options_name_the_flag_before_torch_transformers_or_spacy_load(
    case, corpus_file, tmp_path
):
    args, message = BAD_OPTIONS[case]
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "distill",
            str(corpus_file),
            "--model",
            "m",
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stdout.strip() == "[]"  # none of the heavy libraries was imported
    assert not out.exists()


def _probe(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, check=False
    )


def early_errors(tmp: Path, corpus: Path, out: Path) -> dict[str, tuple[list, int, str]]:
    """Input errors that need no model: the command, its exit status and the message."""
    whole = gzip.compress(b"plain text\n" * 2000)
    files = {
        "fake.txt.gz": b"plain text, not gzip\n",
        "cut.txt.gz": whole[: len(whole) // 2],
        "cut.txt.bz2": bz2.compress(b"plain text\n" * 2000)[:-60],
        "cut.txt.xz": lzma.compress(b"plain text\n" * 2000)[:-60],
        "data.bin": b"\x00\x01binary\x00",
        "binary_vocab.txt": b"cat\n\x00dog\n",
        "tab_vocab.txt": b"cat\tdog\n",
        "blank_vocab.txt": b"\n \n",
    }
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    distill = ["distill", "-m", "m", "-o", out]
    finetune = ["finetune", "-m", "m", "-o", out]
    vocab = [*distill, corpus, "--vocab"]
    return {
        "not gzip": ([*distill, tmp / "fake.txt.gz"], 1, "fake.txt.gz: not valid gzip data"),
        "cut gzip": ([*distill, tmp / "cut.txt.gz"], 1, "cut.txt.gz: truncated gzip file"),
        "cut bzip2": ([*distill, tmp / "cut.txt.bz2"], 1, "cut.txt.bz2: truncated bzip2 file"),
        "cut xz": ([*distill, tmp / "cut.txt.xz"], 1, "cut.txt.xz: truncated xz file"),
        "binary corpus": ([*distill, tmp / "data.bin"], 1, "data.bin: skipped as binary"),
        "--lang": ([*distill, corpus, "--lang", "klingon"], 2, "--lang: spaCy has no language"),
        "--spacy-model": (
            [*distill, corpus, "--spacy-model", "xx_no_such"],
            1,
            "--spacy-model: no installed spaCy pipeline or folder named 'xx_no_such'",
        ),
        "no vocabulary": ([*vocab, tmp / "nope.txt"], 1, "nope.txt: vocabulary file not found"),
        "binary vocabulary": ([*vocab, tmp / "binary_vocab.txt"], 1, "binary_vocab.txt:2: NUL"),
        "tab in vocabulary": ([*vocab, tmp / "tab_vocab.txt"], 1, "tab_vocab.txt:1: tab inside"),
        "empty vocabulary": ([*vocab, tmp / "blank_vocab.txt"], 1, "vocabulary is empty"),
        "no model": (["distill", corpus, "-m", "./no/such", "-o", out], 1, "no such model"),
        "ray options": (
            [*distill, corpus, "--ray-address", "auto", "--encoders", "2"],
            2,
            "error: --ray-address and --encoders apply only with --engine ray",
        ),
        "finetune cut xz": ([*finetune, tmp / "cut.txt.xz"], 1, "cut.txt.xz: truncated xz file"),
        "finetune --lang": ([*finetune, corpus, "--lang", "klingon"], 2, "spaCy has no language"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not gzip", "cut gzip", "cut bzip2", "cut xz", "binary corpus", "--lang", "--spacy-model",
        "no vocabulary", "binary vocabulary", "tab in vocabulary", "empty vocabulary", "no model",
        "ray options", "finetune cut xz", "finetune --lang",
    ],
)  # fmt: skip
def test_inputs_that_need_no_model_are_refused_before_torch_transformers_or_spacy_load(
    case, corpus_file, tmp_path
):
    out = tmp_path / "out"
    args, status, message = early_errors(tmp_path, corpus_file, out)[case]
    result = _probe(*args)
    assert result.returncode == status, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert result.stdout.strip() == "[]"  # none of the heavy libraries was imported
    assert not out.exists()


def test_resume_refuses_another_output_folder(corpus_file, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    result = _probe("distill", "--resume", folder, "--out", tmp_path / "other")
    assert result.returncode != 0
    assert result.stderr == (
        f"error: --out with --resume: a resumed run writes into its own folder, {folder}; "
        "leave --out out\n"
    )


def option_rows(text: str) -> dict[str, str]:
    """The row of each option in --help's table, by its long flag."""
    return {m.group(1): line for line in text.splitlines() if (m := OPTION_ROW.match(line))}


def help_text(*command: str) -> str:
    result = run(*command, "--help", env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_shows_every_option_help_and_default_and_no_bool_type(command):
    text = help_text(command)
    lines = option_rows(text)
    for flag, option in options_of(command).items():
        line = lines[flag]
        assert option.help in line, f"{flag}: help text lost in {line!r}"
        if isinstance(option.show_default, str):
            assert option.show_default in line, f"{flag}: default lost in {line!r}"
    assert "<bool>" not in text


def test_distill_help_shows_the_batch_and_length_defaults():
    lines = option_rows(help_text("distill"))
    assert "8192 on CPU" in lines["--batch-tokens"]
    assert "the model's limit" in lines["--max-length"]


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.output == f"{roberta_static.__version__}\n"
    installed = subprocess.run(
        [sys.executable, "-m", "roberta_static", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert installed.stdout.strip() == roberta_static.__version__


def test_a_value_after_a_flag_is_a_one_line_error():
    result = run("postprocess", "in", "out", "--center", "true")
    line = one_error_line(result)
    assert "unexpected extra argument" in line and line.endswith("(true)")


@pytest.mark.parametrize("value", ["true", "False", "yes"])
def test_a_value_after_an_on_off_option_is_named_as_such(value, tmp_path):
    # distill takes several corpus paths, so Typer reads the value as one: the error says why.
    result = run(
        "distill", "examples/wiki.txt", "--center", value, "--model", "m", "--out", tmp_path / "o"
    )
    assert (
        one_error_line(result)
        == f"error: --center takes no value: write --center, not --center {value}"
    )
    assert result.exit_code == 2


def usage_errors(corpus: Path, out: Path) -> dict[str, tuple[list, str]]:
    """Command lines wrong in themselves (no file or model needs reading to tell), each message."""
    distill = ["distill", corpus, "-m", "m", "-o", out]
    return {
        "on/off option given a value": (
            [*distill, "--center", "yes"],
            "error: --center takes no value: write --center, not --center yes",
        ),
        "finetune batch size and budget": (
            [
                "finetune",
                corpus,
                "-m",
                "m",
                "-o",
                out,
                "--batch-size",
                "4",
                "--batch-tokens",
                "4096",
            ],
            "error: --batch-tokens: cannot be combined with a batch size",
        ),
        "finetune options with --resume": (
            ["finetune", corpus, "--resume", out, "--epochs", "2"],
            "error: --epochs with --resume: a resumed run keeps the options it started with",
        ),
        "layers": ([*distill, "--layers", "3-1"], "error: --layers: range '3-1' must go upwards"),
        "formats": ([*distill, "--formats", "kv,glove"], "error: --formats: unknown ['glove']"),
        "weighting without a weighted format": (
            [*distill, "--formats", "kv", "--sif-coefficient", "0.001"],
            "error: --sif-coefficient: weights the model2vec and sentence-transformers exports only",
        ),
        "ray options": (
            [*distill, "--encoders", "2"],
            "error: --encoders applies only with --engine ray",
        ),
        "lang": ([*distill, "--lang", "klingon"], "error: --lang: spaCy has no language 'klingon'"),
        "an input left out": (
            ["distill", corpus, "-m", "m"],
            "error: distill needs CORPUS, --model and --out (or --resume OUT); --out is missing",
        ),
        "--out with --resume": (
            ["distill", "--resume", out, "--out", out.parent / "other"],
            "error: --out with --resume: a resumed run writes into its own folder",
        ),
        "sweep": (
            ["sweep", corpus, "-m", "m", "-o", out, "--batch-tokens", "100", "--max-length", "200"],
            "error: --batch-tokens: must hold one sequence of the longest input (200 tokens)",
        ),
        "postprocess without a step": (
            ["postprocess", corpus, out],
            "error: postprocess: choose at least one of --center",
        ),
        "half a layer view": (
            ["report", corpus, "--out", out / "r.html", "--word", "war"],
            "error: the layer view needs --sentence, --word and --model; got only --word",
        ),
        "export formats": (["export", out, "--formats", "glove"], "error: --formats: unknown"),
        "empty --out": ([*distill[:-1], ""], "error: --out is empty; give a path"),
        "empty --out=": (["distill", corpus, "-m", "m", "--out="], "error: --out is empty"),
        "empty corpus path": (["distill", "", "-m", "m", "-o", out], "error: CORPUS is empty"),
        "empty --vocab": ([*distill, "--vocab", ""], "error: --vocab is empty; give a path"),
        "empty postprocess OUT": (["postprocess", corpus, ""], "error: OUT is empty"),
        "empty --model": (["distill", corpus, "-m", "", "-o", out], "error: --model is empty"),
        "finetune empty --model": (["finetune", corpus, "-m", "", "-o", out], "error: --model is"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "on/off option given a value", "finetune batch size and budget",
        "finetune options with --resume", "layers", "formats",
        "weighting without a weighted format", "ray options", "lang", "an input left out",
        "--out with --resume", "sweep", "postprocess without a step", "half a layer view",
        "export formats", "empty --out", "empty --out=", "empty corpus path", "empty --vocab",
        "empty postprocess OUT", "empty --model", "finetune empty --model",
    ],
)  # fmt: skip
def test_a_malformed_command_line_is_a_usage_error_with_status_2(case, corpus_file, tmp_path):
    out = tmp_path / "out"
    args, message = usage_errors(corpus_file, out)[case]
    result = run(*args)
    assert result.exit_code == 2
    assert one_error_line(result).startswith(message)
    assert not out.exists()


@pytest.fixture()
def exported(tmp_path) -> Path:
    folder = tmp_path / "vectors"
    StaticVectors(["war", "peace"], np.eye(2, dtype=np.float32), np.array([3, 1])).save(folder)
    export(folder, ["kv", "word2vec"])
    return folder


def advice_cases(vectors: Path, tmp: Path, model: Path, corpus: Path) -> dict[str, list]:
    """Arguments of each command whose error advises flags."""
    full = tmp / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    unknown = tmp / "unknown.txt"
    unknown.write_text("qqqq\n")
    distilling = [corpus, "--model", model, "--out", tmp / "o", "-q"]
    return {
        "spacy-init kv": ["spacy-init", vectors / "vectors.kv", tmp / "pipeline"],
        "similar kv": ["similar", vectors / "vectors.kv", "war"],
        "evaluate kv": ["evaluate", vectors / "vectors.kv"],
        "export exists": ["export", vectors, "--formats", "word2vec"],
        "postprocess full": ["postprocess", vectors, full, "--center"],
        "spacy-init full": ["spacy-init", vectors, full],
        "distill full": ["distill", corpus, "--model", model, "--out", full],
        "sweep full": ["sweep", corpus, "--model", model, "--out", full],
        "distill unseen": ["distill", *distilling, "--vocab", unknown, "-l", "1"],
        "sweep unseen": ["sweep", *distilling, "--vocab", unknown],
        "distill memory": ["distill", *distilling, "-l", "1"],
        "sweep memory": ["sweep", *distilling],
    }


ADVICE_CASES = [
    "spacy-init kv",
    "similar kv",
    "evaluate kv",
    "export exists",
    "postprocess full",
    "spacy-init full",
    "distill full",
    "sweep full",
    "distill unseen",
    "sweep unseen",
    "distill memory",
    "sweep memory",
]


@pytest.mark.parametrize("case", ADVICE_CASES)
def test_every_flag_an_error_advises_exists_on_that_command(
    case, exported, tmp_path, roberta_dir, corpus_file, monkeypatch
):
    if case.endswith("memory"):
        monkeypatch.setattr("roberta_static.api.free_memory", lambda device: 1)
    args = advice_cases(exported, tmp_path, roberta_dir, corpus_file)[case]
    line = one_error_line(run(*args))
    advised = set(FLAG.findall(line))
    assert advised, line
    assert advised <= flags_of(args[0]), f"{line}: {args[0]} has no {advised - flags_of(args[0])}"


def test_every_flag_named_in_the_source_exists():
    root = Path(__file__).resolve().parents[1]
    other_tools = {"--head"}  # `ray start --head`, which the Ray engine's errors advise
    group = {name for param in typer.main.get_command(app).params for name in param.opts}
    every = set().union(*(flags_of(c) for c in COMMANDS)) | group | {"--help"} | other_tools
    for folder in ("roberta_static", "cli", "spacy_plugin"):
        for path in (root / folder).glob("*.py"):
            named = set(FLAG.findall(path.read_text(encoding="utf-8")))
            assert named <= every, f"{path.name} names {named - every}"


def test_spacy_init_loads_a_kv_file_when_allowed(exported, tmp_path):
    import spacy

    result = run("spacy-init", exported / "vectors.kv", tmp_path / "pipeline", "--allow-pickle")
    assert result.exit_code == 0, result.output
    nlp = spacy.load(tmp_path / "pipeline")
    np.testing.assert_array_equal(nlp.vocab.vectors["war"], [1, 0])


def test_library_options_keep_their_name_as_flag():
    """ConfigError names a field; the CLI shows it as --field-name, which must be its flag."""
    import dataclasses

    from roberta_static.cli._util import flag
    from roberta_static.config import DistillConfig

    fields = {f.name for f in dataclasses.fields(DistillConfig)} | {"formats"}
    checked = 0
    for command in typer.main.get_command(app).commands.values():
        for param in command.params:
            if param.name in fields:
                assert flag(param.name) in param.opts, (
                    f"{command.name}: {param.name} is {param.opts}"
                )
                checked += 1
    assert checked > 20


def test_layers_minus_zero_is_refused_before_torch_transformers_or_spacy_load(
    corpus_file, tmp_path
):
    out = tmp_path / "out"
    result = _probe("distill", corpus_file, "-m", "m", "-o", out, "--layers", "-0")
    assert result.returncode != 0 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: --layers: -0 in '-0' is ambiguous")
    assert result.stdout.strip() == "[]" and not out.exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--max-length", "3"], "error: --max-length: 3 leaves 1 of the 2 tokens of text"),
        (["--max-length", "2"], "error: --max-length: 2 leaves 0 of the 2 tokens of text"),
        (["--layers", "-100"], "error: --layers: [-100] out of range; this model has layers 0-2"),
    ],
)
def test_options_the_model_cannot_serve_are_one_line_errors(
    args, message, roberta_dir, corpus_file, tmp_path
):
    out = tmp_path / "out"
    line = one_error_line(run("distill", corpus_file, "-m", roberta_dir, "-o", out, *args))
    assert line.startswith(message) and not out.exists()
