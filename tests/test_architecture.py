"""The house as docs/architecture.md draws it: every folder of ``study`` and each of its
modules on the map, and imports that run one way, from the mathematics up to the commands."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAP = (ROOT / "docs" / "architecture.md").read_text()

# Lower layers first; a module may import its own layer and those before it.
LAYERS = [
    {"allocation"},
    {"protocol"},
    {"task"},
    {"people"},
    {"pool"},
    {"storage"},
    {"calibration", "exports", "bots"},
    {"web"},
    {"commands", "cli", "analysis"},
]


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    room = parts[0] if parts[0] == "analysis" else (parts[1] if len(parts) > 1 else None)
    return next((number for number, rooms in enumerate(LAYERS) if room in rooms), None)


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path) -> list[str]:
    """What a module imports anywhere: at its top, inside functions, and for type checking
    alone (a type named from a later layer is an arrow pointing up too)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.split(".")[0] in {"study", "analysis"}]


def sources() -> list[Path]:
    return sorted([*ROOT.glob("study/**/*.py"), *ROOT.glob("analysis/**/*.py")])


def map_rows() -> dict[str, str]:
    return {match.group(1): match.group(0)
            for match in re.finditer(r"^\| `(study/[\w/]+/)` .*$", MAP, re.M)}


def test_every_folder_and_module_of_study_is_on_the_map():
    """A folder's modules are named in its row, or a subfolder's in its parent's."""
    rows = map_rows()
    folders = [init.parent for init in sorted(ROOT.glob("study/*/**/__init__.py"))]
    assert len(folders) > 8
    for folder in folders:
        name = f"{folder.relative_to(ROOT)}/"
        row = rows.get(name) or rows.get(f"{folder.parent.relative_to(ROOT)}/")
        assert row, f"{name} has no row on the map"
        if name == "study/web/":
            continue
        for module in sorted(folder.glob("*.py")):
            if module.name != "__init__.py":
                assert f"`{module.name}`" in row, f"{name}{module.name} is not on the map"


@pytest.mark.parametrize("path", sources(), ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_run_one_way(path: Path):
    here = module_name(path)
    own = layer_of(here)
    for name in imports(path):
        theirs = layer_of(name)
        if own is None or theirs is None:
            continue
        assert theirs <= own, f"{here} imports {name}, a later layer"


@pytest.mark.parametrize("path", sources(), ids=lambda path: str(path.relative_to(ROOT)))
def test_only_the_serve_command_imports_the_web_app(path: Path):
    here = module_name(path)
    if here.startswith("study.web") or here == "study.commands.serve":
        return
    assert not [name for name in imports(path) if name.startswith("study.web")], here
