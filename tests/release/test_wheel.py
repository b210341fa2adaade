"""The wheel that `make dist` builds works outside a clone.

`make test-wheel` builds it and names it in TRACEFACT_WHEEL; the test installs it (not
editable, with the collector extra, at the dev lock's versions) into a fresh virtual
environment and runs everything from a directory with no source tree: the embedded model
judges a case, the console script answers, and a README usage block runs as written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEEL = os.environ.get("TRACEFACT_WHEEL")
UV = os.environ.get("TRACEFACT_UV", str(ROOT / ".uv" / "bin" / "uv"))

pytestmark = pytest.mark.skipif(not WHEEL, reason="needs a built wheel: `make test-wheel`")


@pytest.fixture(scope="module")
def wheel() -> Path:
    assert WHEEL
    return Path(WHEEL).resolve()


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel; yields its bin directory."""
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    run([UV, "venv", "-q", "--python", sys.executable, str(venv)], ROOT)
    python = venv / "bin" / "python"
    constraints = ROOT / "locks" / "dev.txt"
    run([UV, "pip", "install", "-q", "--python", str(python), "-c", str(constraints),
         f"tracefact[collector] @ {wheel.as_uri()}"], ROOT)  # fmt: skip
    yield venv / "bin"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory with no source tree above it."""
    assert not (tmp_path / "src").exists() and ROOT not in tmp_path.parents
    return tmp_path


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEFACT_", "OTEL_"))}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_carries_the_model_types_licence_and_entry_point(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("model.onnx", "config.json", "tokenizer.json"):
        assert f"tracefact/models/local_factuality/{needed}" in names
    assert "tracefact/py.typed" in names
    assert any(re.fullmatch(r"tracefact-[^/]+\.dist-info/licenses/LICENSE", n) for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "tracefact = tracefact.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_package_is_the_wheel_not_the_clone(installed: Path, outside: Path) -> None:
    done = run([str(installed / "python"), "-c", "import tracefact; print(tracefact.__file__)"],
               outside)  # fmt: skip
    location = Path(done.stdout.strip())
    assert "site-packages" in location.parts and ROOT not in location.parents


def test_the_embedded_model_judges_a_case(installed: Path, outside: Path) -> None:
    code = (
        "import asyncio\n"
        "from tracefact.evaluators import EvalCase, LocalFactuality\n"
        "case = EvalCase(input='When did it open?', contexts=['The museum opened in 1889.'],\n"
        "                output='The museum opened in 1889.')\n"
        "result = asyncio.run(LocalFactuality().evaluate(case))\n"
        "print(result.label, result.evaluator)\n"
    )
    done = run([str(installed / "python"), "-c", code], outside)
    label, evaluator = done.stdout.split()
    assert label in ("factual", "hallucinated") and evaluator.startswith("local-factuality")


@pytest.mark.parametrize("command", [["eval", "--help"], ["collector", "--help"]])
def test_the_console_script_answers(installed: Path, outside: Path, command: list[str]) -> None:
    done = run([str(installed / "tracefact"), *command], outside)
    assert done.stdout.startswith("usage: tracefact")


def test_the_readme_usage_block_runs(installed: Path, outside: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    usage = readme[readme.index("## Usage") :]
    block = re.search(r"^```python\n(.*?)^```", usage, re.DOTALL | re.MULTILINE)
    assert block is not None
    done = run([str(installed / "python"), "-c", block.group(1)], outside)
    assert '"tracefact.eval.status"' in done.stdout and not done.stderr
