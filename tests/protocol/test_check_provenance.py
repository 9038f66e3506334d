"""``study check`` and ``study serve`` refuse FEA bounds that are not those of the pool the
protocol builds: their ``bounds_source`` must cite that pool's teams digest, unless the
protocol declares them fixed on purpose (``[pool.fea] bounds_fixed = true``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from study.cli import main
from study.pool import ensure_pool
from study.pool.bounds import cited_percentiles, derive_bounds
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ROOT / "protocols"
SHIPPED = sorted(PROTOCOLS.glob("*.toml"))
STALE = "53bc306fac969078"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_the_shipped_bounds_cite_the_teams_their_spec_builds(path, capsys):
    spec = load_protocol(path).pool_spec()
    if spec.fea is not None:
        assert not spec.fea.fixed
        assert f"teams digest {spec.teams_digest()[:16]}" in spec.fea.source
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["study2", "study2-paper", "teams2", "teams3"])
def test_the_shipped_bounds_are_those_of_the_pool_built(name, tmp_path):
    """The values too, not only the digest: ``study pool bounds`` on the built pool, by the
    rule the source cites (min and max, or percentiles), gives exactly the shipped bounds
    (study1's pool is too slow to build here)."""
    spec = load_protocol(PROTOCOLS / f"{name}.toml").pool_spec()
    derived = derive_bounds(ensure_pool(spec, tmp_path, progress=False),
                            cited_percentiles(spec.fea.source))
    assert (derived.lo, derived.hi) == (spec.fea.lo, spec.fea.hi)


def study2_with(tmp_path: Path, old: str, new: str) -> tuple[Path, str]:
    """Study2 with ``old`` replaced by ``new``, and the teams digest its spec builds."""
    shipped = PROTOCOLS / "study2.toml"
    built = load_protocol(shipped).pool_spec().teams_digest()[:16]
    text = shipped.read_text(encoding="utf-8")
    assert old.format(built=built) in text
    path = tmp_path / "study2.toml"
    path.write_text(text.replace(old.format(built=built), new), encoding="utf-8")
    return path, built


def line_of(path: Path, start: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1)
                if line.startswith(start))


def test_a_stale_digest_is_refused_naming_both_digests(tmp_path, capsys):
    path, built = study2_with(tmp_path, "teams digest {built}", f"teams digest {STALE}")
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    line = line_of(path, "bounds_source")
    assert err.startswith(f"study: error: {path}:{line}: pool.fea.bounds_source: ")
    assert f"cites teams digest {STALE}" in err and f"has teams digest {built}" in err
    assert "bounds_fixed = true" in err


def test_new_sampling_ranges_make_the_old_bounds_stale(tmp_path, capsys):
    """The issue's case: the ranges changed, the bounds and their source did not."""
    path, built = study2_with(tmp_path, "c = [[0.20, 0.32], [0.63, 1.00]]",
                              "c = [[0.29, 0.32], [0.61, 0.80]]")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    now = load_protocol(path).pool_spec().teams_digest()[:16]
    assert f"cites teams digest {built}" in err and f"has teams digest {now}" in err


def test_bounds_citing_no_teams_digest_are_refused_unless_fixed(tmp_path, capsys):
    path, _ = study2_with(tmp_path, "teams digest {built}", "a pilot's live teams")
    assert main(["check", str(path)]) == 2
    assert "cites no teams digest" in capsys.readouterr().err
    fixed = path.read_text().replace("[pool.fea]", "[pool.fea]\nbounds_fixed = true", 1)
    path.write_text(fixed)
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "valid protocol 'study2'" in out and err == ""
    assert load_protocol(path).pool_spec().fea.fixed


def test_bounds_fixed_must_be_a_boolean(tmp_path, capsys):
    path, _ = study2_with(tmp_path, "[pool.fea]", '[pool.fea]\nbounds_fixed = "yes"')
    assert main(["check", str(path)]) == 2
    assert "pool.fea.bounds_fixed" in capsys.readouterr().err


def test_a_fixed_bounds_flag_changes_the_pool_digest_and_only_when_set(tmp_path):
    """A pool file records whether its bounds were fixed; the digests of specs without
    the key stay as they were (no cached pool is rebuilt for it)."""
    shipped = load_protocol(PROTOCOLS / "study2.toml").pool_spec()
    assert "bounds_fixed" not in shipped.to_dict()["fea"]
    path, _ = study2_with(tmp_path, "[pool.fea]", "[pool.fea]\nbounds_fixed = true")
    fixed = load_protocol(path).pool_spec()
    assert fixed.to_dict()["fea"]["bounds_fixed"] is True
    assert fixed.digest() != shipped.digest() and fixed.teams_digest() == shipped.teams_digest()


def test_study_serve_refuses_stale_bounds_before_building_anything(tmp_path):
    path, _ = study2_with(tmp_path, "teams digest {built}", f"teams digest {STALE}")
    run = tmp_path / "run"
    run.mkdir()
    done = subprocess.run([sys.executable, "-m", "study.cli", "serve", str(path), "--port",
                           "0", "--pools", str(run / "pools"), "--db", str(run / "s.sqlite")],
                          capture_output=True, text=True, timeout=120, cwd=run,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"study: error: {path}:{line_of(path, 'bounds_source')}: "
                                  f"pool.fea.bounds_source: cites teams digest {STALE}")
    assert list(run.rglob("*")) == [], "no pool built, no database written"
