"""Every Python block in the README and the reference pages (docs/, collector/) runs as written.

Each block runs alone in a fresh interpreter, as a reader pasting it would run it, with
no tracefact or OpenTelemetry variables set and no API key. It must exit 0 and write
nothing to stderr: no traceback, no warning, no retry noise. A block whose first line is
``# needs: ...`` names something the tests do not provide (a running server, a paid
key); it is only compiled.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted(ROOT.glob("docs/**/*.md")),
    *ROOT.glob("collector/**/*.md"),
]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
NEEDS = "# needs:"
"""The marker, explained in the README: the block needs something the tests lack."""


def blocks() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{document.relative_to(ROOT)}:{line}", match.group(1)))
    return found


BLOCKS = blocks()


def test_the_readme_and_the_reference_pages_have_python_blocks() -> None:
    """The README keeps the newcomer's examples; the reference moved to docs/ with its own."""
    assert len([where for where, _ in BLOCKS if where.startswith("README.md")]) >= 2
    assert len([where for where, _ in BLOCKS if where.startswith("docs/")]) >= 12


def test_the_readme_stays_a_newcomers_page_and_links_every_reference_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for page in sorted(ROOT.glob("docs/*.md")):
        assert f"](docs/{page.name})" in readme, page.name
    for heading in ("## Install", "## Quick start", "## Usage", "## Already instrumented?"):
        assert f"\n{heading}" in readme, heading
    assert "\n## The collector" in readme and "\n## Where results show up" in readme


def clean_environment() -> dict[str, str]:
    """This interpreter's environment without settings a reader would not have."""
    prefixes = ("TRACEFACT_", "OTEL_", "OPENAI_", "ANTHROPIC_", "VECTARA_", "PYTEST_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONWARNINGS"] = "default"  # warnings show on stderr, where the test sees them
    return env


def run_alone(code: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter, as a reader pasting it into a file would run it."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_block_runs_as_written(where: str, code: str, tmp_path: Path) -> None:
    check_block(where, code, tmp_path)


def check_block(where: str, code: str, directory: Path) -> None:
    """Run `code` alone; a block marked ``# needs:`` is only compiled."""
    if code.lstrip().startswith(NEEDS):
        compile(code, where, "exec")
        return
    ran = run_alone(code, directory)
    assert ran.returncode == 0, f"{where} failed:\n{ran.stderr}"
    assert ran.stderr == "", f"{where} wrote to stderr:\n{ran.stderr}"


def test_a_marked_block_is_compiled_but_not_run(tmp_path: Path) -> None:
    check_block("marked", "# needs: a Phoenix server\nimport not_installed_here\n", tmp_path)
    with pytest.raises(SyntaxError):
        check_block("marked", "# needs: a key\nawait judge()\n", tmp_path)
    with pytest.raises(AssertionError, match="wrote to stderr"):
        check_block("noisy", "import sys\nprint('retrying...', file=sys.stderr)\n", tmp_path)


def test_the_usage_example_prints_its_evaluated_span(tmp_path: Path) -> None:
    """The first block ends its script right after the call: the exit drain evaluates it."""
    where, code = BLOCKS[0]
    assert "rag(" in code, where
    ran = run_alone(code, tmp_path)
    assert '"tracefact.eval.status": "ok"' in ran.stdout
    assert '"tracefact.eval.hallucination.label": "factual"' in ran.stdout


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file(document: Path) -> None:
    """Pages moved to docs/ keep working links (to examples/, collector/, each other)."""
    text = document.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (document.parent / target).exists(), f"{document.name}: {target}"
