"""``study check`` warns when a protocol's FEA bounds cite teams its pool no longer builds:
the bounds' provenance (``bounds_source``) must stay true of the pool actually built."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.cli import main
from study.protocol import load_protocol

PROTOCOLS = Path(__file__).resolve().parents[1] / "protocols"
STALE = "53bc306fac969078"


@pytest.mark.parametrize("name", ["study1", "study2"])
def test_the_shipped_bounds_cite_the_teams_their_spec_builds(name, capsys):
    spec = load_protocol(PROTOCOLS / f"{name}.toml").pool_spec()
    assert f"teams digest {spec.teams_digest()[:16]}" in spec.fea.source
    assert main(["check", str(PROTOCOLS / f"{name}.toml")]) == 0
    assert "warning" not in capsys.readouterr().err


def study2_citing(tmp_path: Path, cited: str) -> tuple[Path, str]:
    """Study2 with ``cited`` in place of its teams digest, and the digest its spec builds."""
    shipped = PROTOCOLS / "study2.toml"
    built = load_protocol(shipped).pool_spec().teams_digest()[:16]
    text = shipped.read_text(encoding="utf-8").replace(f"teams digest {built}", cited)
    path = tmp_path / "study2.toml"
    path.write_text(text, encoding="utf-8")
    return path, built


def test_a_stale_digest_is_a_warning_naming_both_digests(tmp_path, capsys):
    path, built = study2_citing(tmp_path, f"teams digest {STALE}")
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "valid protocol 'study2'" in out
    assert err.count("warning") == 1
    assert f"cites teams digest {STALE}" in err and f"has teams digest {built}" in err


def test_bounds_citing_no_teams_digest_are_not_warned_about(tmp_path, capsys):
    path, _ = study2_citing(tmp_path, "a pilot's live teams")
    assert main(["check", str(path)]) == 0
    assert "warning" not in capsys.readouterr().err
