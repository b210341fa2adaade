"""The locks in locks/ are what every make target installs: they must match pyproject.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)
WITHDRAWN_LITELLM = {"1.82.7", "1.82.8"}


def pins(lock: str) -> dict[str, str]:
    text = (ROOT / "locks" / lock).read_text(encoding="utf-8")
    found = {canonicalize_name(name): version for name, version in PINNED.findall(text)}
    assert found, f"{lock} pins nothing"
    return found


def requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's dependencies with `extras`, its own extras followed."""
    wanted = [Requirement(r) for r in PROJECT["dependencies"]]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in map(Requirement, PROJECT["optional-dependencies"][extra]):
            if canonicalize_name(requirement.name) == "tracefact":
                pending.extend(requirement.extras)
            else:
                wanted.append(requirement)
    return wanted


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("runtime.txt", ()),
        ("dev.txt", ("dev",)),
        ("instrumentors.txt", ("dev", "instrumentors")),
        ("agents.txt", ("dev", "agents")),
        ("bench.txt", ("bench",)),
    ],
)
def test_each_lock_pins_every_dependency_in_range(lock: str, extras: tuple[str, ...]) -> None:
    pinned = pins(lock)
    for requirement in requirements(extras):
        version = pinned.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not in locks/{lock}: run `make lock`"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"locks/{lock} pins {requirement.name}=={version}, outside {requirement}: "
            "run `make lock`"
        )


def test_demo_and_tests_share_one_set_of_versions() -> None:
    dev = pins("dev.txt")
    assert {name: dev.get(name) for name in pins("runtime.txt")} == pins("runtime.txt")


def test_no_lock_holds_a_withdrawn_litellm() -> None:
    for lock in sorted((ROOT / "locks").glob("*.txt")):
        assert pins(lock.name).get("litellm") not in WITHDRAWN_LITELLM, lock.name


def test_every_lock_carries_hashes() -> None:
    for lock in sorted((ROOT / "locks").glob("*.txt")):
        text = lock.read_text(encoding="utf-8")
        assert text.count("--hash=sha256:") >= len(pins(lock.name)), lock.name
