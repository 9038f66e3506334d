"""``pyproject.toml`` declares every package the code imports, under the names the packages
publish (an older pip does not match ``asyncio_client`` to ``asyncio-client`` and leaves
aiohttp out), and its license as an SPDX string (setuptools warns about the old table)."""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
OPTIONAL = [req for group in PROJECT["project"]["optional-dependencies"].values() for req in group]
LOCAL = {"study", "analysis", "benchmarks", "tests"} | {
    path.stem for folder in ("tests", "benchmarks") for path in (ROOT / folder).rglob("*.py")} | {
    path.parent.name for path in (ROOT / "tests").rglob("__init__.py")}


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parsed(requirement: str) -> tuple[str, list[str]]:
    """A requirement's distribution name and extras, as written."""
    match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", requirement)
    assert match, requirement
    extras = [extra.strip() for extra in (match.group(2) or "").split(",") if extra.strip()]
    return match.group(1), extras


def declared(requirements: list[str]) -> set[str]:
    """The distributions named, and those their named extras bring in."""
    names = set()
    for requirement in requirements:
        name, extras = parsed(requirement)
        names.add(normalised(name))
        for needed in metadata.requires(name) or []:
            if any(re.search(rf"extra == \"{re.escape(extra)}\"", needed) for extra in extras):
                names.add(normalised(parsed(needed)[0]))
    return names


def third_party_imports(*folders: str) -> dict[str, str]:
    """Top-level modules imported under ``folders`` that are neither the standard
    library nor this project's own, with a file importing each."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in LOCAL:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


@functools.cache
def distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def distribution_of(module: str) -> str:
    return normalised(distributions()[module][0])


def test_extras_are_spelled_as_their_packages_publish_them():
    for requirement in PROJECT["project"]["dependencies"] + OPTIONAL:
        name, extras = parsed(requirement)
        published = metadata.metadata(name).get_all("Provides-Extra") or []
        for extra in extras:
            assert extra in published, f"{requirement}: {name} publishes {published}"


def test_every_package_the_platform_imports_is_declared():
    runtime = declared(PROJECT["project"]["dependencies"])
    optional = declared(OPTIONAL)
    for module, where in third_party_imports("study", "analysis").items():
        assert distribution_of(module) in runtime | declared(
            PROJECT["project"]["optional-dependencies"]["dask"]), f"{module} ({where})"
    for module, where in third_party_imports("tests", "benchmarks").items():
        assert distribution_of(module) in runtime | optional, f"{module} ({where})"


def test_the_license_is_an_spdx_expression():
    assert PROJECT["project"]["license"] == "MIT"
    assert PROJECT["build-system"]["requires"] == ["setuptools>=77"]
