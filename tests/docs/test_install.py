"""What a new user installs: a license that matches the metadata, extras the README names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tracefact._imports import MissingExtraError, install_hint

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_license_file_is_mit_as_the_metadata_says() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 tracefact contributors" in text


def test_readme_install_section_names_every_extra_and_the_clone_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in extras:
        assert re.search(rf"^\| `{extra}` \|", install, re.MULTILINE), extra
    assert "pip install -e '.[litellm]'" in install
    assert install_hint("litellm") in " ".join(install.split())  # the errors say the same


def test_missing_extra_error_is_permanent_and_an_import_error() -> None:
    error = MissingExtraError("litellm", "litellm")
    assert isinstance(error, ImportError) and not error.transient
    assert "pip install 'tracefact[litellm]'" in str(error)
    assert "pip install -e '.[litellm]'" in str(error)


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_install_tracefact_from_a_clone_or_the_wheel(example: Path) -> None:
    """Tracefact is on no package index: `pip install tracefact` fails for a user."""
    text = example.read_text()
    installs = re.findall(r"^\s*pip install (.*)$", text, re.MULTILINE)
    assert not any(re.match(r"tracefact\b", line) for line in installs), installs
    if "import tracefact" in text:
        assert any(line.startswith("-e .") for line in installs), installs
        assert "dist/tracefact-*.whl" in text


@pytest.mark.parametrize("command", ["collector", "worker"])
@pytest.mark.parametrize("missing", ["prometheus_client", "grpc", "yaml"])
def test_a_service_command_names_the_one_extra_that_covers_it(
    command: str,
    missing: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whichever of its modules is missing, one install makes the command work."""
    from tracefact.cli import main

    monkeypatch.setitem(sys.modules, missing, None)  # what an install without it sees
    path = tmp_path / "tracefact.yaml"
    path.write_text("upstreams:\n  - endpoint: http://127.0.0.1:9\n")
    assert main([command, "--config", str(path)]) == 2
    error = capsys.readouterr().err
    assert install_hint("collector") in error and "prometheus]" not in error, error
