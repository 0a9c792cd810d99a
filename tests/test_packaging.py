"""The package as spaCy and Python find it: from a source checkout, and with a broken component."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]

# An editable install maps roberta_static.cli and .spacy_plugin with a finder of its own; without
# it, a process started in the checkout finds only the checkout's folders, as it does next to a
# plain `pip install .`, whose installed copy the checkout shadows.
WITHOUT_EDITABLE_FINDER = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in f.__module__]\n"
)
BREAK_COMPONENT = (
    "import sys\n"
    "class Broken:\n"
    "    @staticmethod\n"
    "    def find_spec(name, path=None, target=None):\n"
    "        if name == 'roberta_static.spacy_plugin.component':\n"
    "            raise ImportError('simulated: the component cannot be imported')\n"
    "sys.meta_path.insert(0, Broken)\n"
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


def test_a_broken_component_leaves_spacy_working_and_add_pipe_names_the_problem(tmp_path):
    code = BREAK_COMPONENT + (
        "import spacy\n"
        "nlp = spacy.blank('en')\n"
        "spacy.util.registry.callbacks.get_all()\n"
        "print(nlp('still works')[1].text)\n"
        "try:\n"
        "    nlp.add_pipe('roberta_static')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["works", "simulated: the component cannot be imported"]


def test_the_entry_point_module_imports_none_of_our_heavy_parts(tmp_path):
    # (spaCy itself imports torch through thinc when it is installed.)
    code = (
        "import sys\n"
        "import roberta_static.spacy_plugin.factories\n"
        "ours = ('transformers', 'gensim', 'roberta_static.model.encoder', 'roberta_static.api',\n"
        "        'roberta_static.spacy_plugin.component', 'roberta_static.spacy_plugin.tables')\n"
        "print([name for name in ours if name in sys.modules])\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_wheel_holds_every_module_and_template_of_the_checkout(tmp_path):
    """What `pip install .` installs: an editable install finds folders the wheel may leave out."""
    pytest.importorskip("setuptools")
    source = tmp_path / "source"  # a copy: a build/ folder left in the checkout could hide a gap
    for name in ("roberta_static", "cli", "spacy_plugin"):
        shutil.copytree(
            CHECKOUT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheel"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("roberta_static-*.whl")
    installed = set(zipfile.ZipFile(wheel).namelist())
    folders = {"roberta_static": "roberta_static", "cli": "roberta_static/cli",
               "spacy_plugin": "roberta_static/spacy_plugin"}  # fmt: skip
    expected = {
        f"{name}/{path.relative_to(CHECKOUT / folder).as_posix()}"
        for folder, name in folders.items()
        for path in (CHECKOUT / folder).rglob("*")
        if path.suffix in (".py", ".j2") and "__pycache__" not in path.parts
    }
    assert expected - installed == set()
