"""The package as spaCy and Python find it: from a source checkout, and with a broken component."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]

# An editable install maps roberta_static.cli and .spacy_plugin with a finder of its own; without
# it, a process started in the checkout finds only the checkout's folders, as it does next to a
# plain `pip install .`, whose installed copy the checkout shadows.
WITHOUT_EDITABLE_FINDER = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in f.__module__]\n"
)
def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_a_checkout_that_shadows_the_installed_package_is_whole():
    code = WITHOUT_EDITABLE_FINDER + (
        f"sys.path.insert(0, {str(CHECKOUT)!r})\n"
        "import spacy\n"
        "nlp = spacy.blank('en')\n"
        "nlp.add_pipe('roberta_static')\n"
        "import roberta_static.cli, roberta_static.spacy_plugin\n"
        "print(roberta_static.__file__)\n"
        "print(roberta_static.cli.__file__)\n"
        "print(roberta_static.spacy_plugin.__file__)\n"
    )
    result = run_python(code, CHECKOUT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        str(CHECKOUT / "roberta_static" / "__init__.py"),
        str(CHECKOUT / "cli" / "__init__.py"),
        str(CHECKOUT / "spacy_plugin" / "__init__.py"),
    ]
