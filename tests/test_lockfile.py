"""The lockfiles (requirements/*.txt, `make lock`) in step with pyproject.toml.

The image installs requirements/runtime.txt, `make test` and CI requirements/dev.txt, both with
`--require-hashes`; pyproject.toml keeps the ranges for library users. A dependency added to
pyproject.toml (or a range moved past its pin) without `make lock` fails here, before an image
or a fresh venv would be built without it. Read from disk only: no network, no resolver.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}\s*\\?$")


@dataclass(frozen=True)
class Pin:
    version: str
    marker: str | None
    hashes: int


def read_lock(path: Path) -> dict[str, list[Pin]]:
    """name → its pins (a universal lock may pin one name twice, under exclusive markers)."""
    pins: dict[str, list[Pin]] = {}
    current: tuple[str, str, str | None] | None = None
    hashes = 0

    def close() -> None:
        if current is not None:
            name, version, marker = current
            pins.setdefault(name, []).append(Pin(version, marker, hashes))

    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if match := _PIN.match(line):
            close()
            current = (canonicalize_name(match[1]), match[2], match[3])
            hashes = 0
        elif _HASH.match(line):
            hashes += 1
        else:
            raise AssertionError(f"{path.name}: a line this test cannot read: {raw!r}")
    close()
    return pins


def pyproject() -> dict:  # type: ignore[type-arg]
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def declared(*extras: str) -> list[Requirement]:
    project = pyproject()["project"]
    names = list(project["dependencies"])
    for extra in extras:
        names += project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


def mismatches(requirements: list[Requirement], lock: dict[str, list[Pin]]) -> list[str]:
    """Each requirement pinned, and every pin of it inside the range pyproject.toml allows."""
    problems = []
    for req in requirements:
        pins = lock.get(canonicalize_name(req.name))
        if not pins:
            problems.append(f"{req} is not pinned")
            continue
        for pin in pins:
            if not req.specifier.contains(pin.version, prereleases=True):
                problems.append(f"{req.name}=={pin.version} is outside {req}")
    return problems


CASES = {
    "runtime.txt": ("postgres",),  # the image's: the product and PostgreSQL
    "dev.txt": ("postgres", "test"),  # `make test` and CI's
}


@pytest.mark.parametrize("lock_name", sorted(CASES))
def test_every_dependency_of_pyproject_is_pinned_within_its_range(lock_name):
    lock = read_lock(LOCKS / lock_name)
    assert mismatches(declared(*CASES[lock_name]), lock) == []


def test_the_tools_that_build_the_images_wheel_are_pinned():
    requires = [Requirement(r) for r in pyproject()["build-system"]["requires"]]
    assert mismatches(requires, read_lock(LOCKS / "build.txt")) == []


@pytest.mark.parametrize("lock_name", ["build.txt", "uv.txt", *sorted(CASES)])
def test_every_pin_carries_a_hash(lock_name):
    lock = read_lock(LOCKS / lock_name)
    assert lock, f"{lock_name} pins nothing"
    assert [name for name, pins in lock.items() if any(p.hashes == 0 for p in pins)] == []


def test_the_uv_that_installs_the_venv_is_the_one_make_lock_pins():
    # `make` installs requirements/uv.txt (hash-checked), then the lockfiles with that uv.
    (pin,) = re.findall(r"^UV_PIN\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    (exact,) = Requirement(pin).specifier
    lock = read_lock(LOCKS / "uv.txt")
    assert {name: [p.version for p in pins] for name, pins in lock.items()} == {
        "uv": [exact.version]}


def test_ci_tests_the_versions_the_image_ships():
    runtime, dev = read_lock(LOCKS / "runtime.txt"), read_lock(LOCKS / "dev.txt")
    differ = {name: (pins, dev.get(name)) for name, pins in runtime.items()
              if {p.version for p in pins} != {p.version for p in dev.get(name, [])}}
    assert differ == {}


def test_a_dependency_added_without_relocking_is_caught(tmp_path):
    # The check itself can fail: a lock that lacks a declared package, or pins it out of range.
    lock = tmp_path / "lock.txt"
    lock.write_text("aiohttp==3.9.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    problems = mismatches([Requirement("aiohttp>=3.11,<4"), Requirement("new-thing>=1")],
                          read_lock(lock))
    assert problems == ["aiohttp==3.9.0 is outside aiohttp<4,>=3.11", "new-thing>=1 is not pinned"]
