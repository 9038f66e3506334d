"""Pool specifications: the shipped protocols, and clear errors for malformed ones."""

from pathlib import Path

import numpy as np
import pytest

from study.pool import PoolSpec
from study.pool.teamtypes import (
    COMPARATIVE_ADVANTAGE,
    HIGHEST_COEFFICIENT,
    TEAM_TYPES,
    average_ranks,
    comparative_advantage,
    most_capable_human,
    team_type_codes,
)
from study.protocol.pool_spec import Criteria
from study.protocol.toml_source import ProtocolError

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"

MINIMAL = """\
[study]
name = "x"

[pool]
teams = 100
seed = 7
algorithms = ["efficient", "fair"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "protocol.toml"
    path.write_text(text, encoding="utf-8")
    return path


def spec_from(tmp_path: Path, pool_lines: str) -> PoolSpec:
    """The minimal protocol's spec with more lines under ``[pool]``."""
    return PoolSpec.from_protocol(write(tmp_path, MINIMAL + pool_lines))


def test_study1_spec_is_the_papers_simulation_study_1():
    spec = PoolSpec.from_protocol(PROTOCOLS / "study1.toml")
    assert (spec.teams, spec.humans, spec.kits) == (500_000, 2, (8, 8))
    assert spec.algorithms == ("efficient", "fair", "fea")
    assert np.all(np.array(spec.sample_c) == np.array([0.01, 0.99]))
    assert np.all(np.array(spec.sample_p) == np.array([0.01, 0.99]))
    assert spec.teammate.criteria.fair_gap_above == 0.60
    assert spec.fea is not None and spec.fea.hi > spec.fea.lo
    assert "study pool bounds" in spec.fea.source


def test_study2_spec_draws_the_papers_capability_intervals_per_team_type():
    spec = PoolSpec.from_protocol(PROTOCOLS / "study2-paper.toml")
    assert spec.teams == 100_000
    squares, letters = spec.sample_c[0]
    assert squares == (0.20, 0.32) and letters == (0.63, 1.00)
    assert spec.sample_c[1] == spec.sample_c[0]
    assert spec.accept.team_types == ("mixed", "twins", "negative")
    assert spec.teammate.criteria.team_types == ("mixed",)
    assert spec.teammate.role == "most-capable"


def test_demo_spec_is_small():
    spec = PoolSpec.from_protocol(PROTOCOLS / "demo.toml")
    assert spec.teams <= 20_000
    assert spec.teammate.criteria.fair_gap_above == 0.60


def test_defaults_and_round_trip_through_the_metadata_form(tmp_path):
    spec = PoolSpec.from_protocol(write(tmp_path, MINIMAL))
    assert spec.kits == (8, 8) and spec.humans == 2 and spec.fea is None
    assert spec.teammate.role == "any"
    again = PoolSpec.from_dict(spec.to_dict(), name=spec.name)
    assert again == spec and again.digest() == spec.digest()


def test_digest_follows_the_content_and_teams_digest_only_the_teams(tmp_path):
    spec = PoolSpec.from_protocol(write(tmp_path, MINIMAL))
    other_filter = PoolSpec.from_protocol(write(tmp_path, MINIMAL + "[pool.teammate]\n"
                                                                    "role = \"other\"\n"))
    assert spec.with_changes(seed=8).digest() != spec.digest()
    assert other_filter.digest() != spec.digest()
    assert other_filter.teams_digest() == spec.teams_digest()
    assert spec.with_changes(teams=99).teams_digest() != spec.teams_digest()


def test_ranges_per_type_and_per_human(tmp_path):
    text = MINIMAL + ("[pool.sample]\nc = [[0.1, 0.2], [0.3, 0.4]]\n"
                      "p = [[[0.1, 0.2], [0.3, 0.4]], [[0.5, 0.6], [0.7, 0.8]]]\n")
    spec = PoolSpec.from_protocol(write(tmp_path, text))
    assert spec.sample_c == (((0.1, 0.2), (0.3, 0.4)),) * 2
    assert spec.sample_p[1] == ((0.5, 0.6), (0.7, 0.8))


@pytest.mark.parametrize(("extra", "field", "words"), [
    ("colour = 3\n", "pool.colour", "unknown key"),
    ("[pool.sample]\nc = [0.5, 1.2]\n", "pool.sample.c", "within [0, 1]"),
    ("[pool.sample]\nc = [0.6, 0.2]\n", "pool.sample.c", "lo is greater than hi"),
    ("[pool.sample]\nc = [[0.1, 0.2]]\n", "pool.sample.c", "one [lo, hi] per task type"),
    ("[pool.sample]\nshape = 1\n", "pool.sample.shape", "unknown key"),
    ("[pool.accept]\nteam_types = [\"mixd\"]\n", "pool.accept.team_types",
     "unknown team type"),
    ("[pool.accept]\nc = [0.995, 1.0]\n", "pool.accept.c", "does not meet"),
    ("[pool.teammate]\nrole = \"captain\"\n", "pool.teammate.role", "expected one of"),
    ("[pool.teammate]\nfair_gap_above = 2\n", "pool.teammate.fair_gap_above", "within"),
    ("[pool.fea]\nw = 0.7\n", "pool.fea", "'fea' is not in pool.algorithms"),
])
def test_malformed_specs_name_the_field_and_its_line(tmp_path, extra, field, words):
    text = MINIMAL + extra
    path = write(tmp_path, text)
    with pytest.raises(ProtocolError) as caught:
        PoolSpec.from_protocol(path)
    error = caught.value
    assert error.field == field
    assert words in str(error)
    assert error.line is not None
    line = text.splitlines()[error.line - 1]
    assert field.split(".")[-1] in line or line.startswith("[pool.")


@pytest.mark.parametrize(("replace", "field", "words"), [
    (("teams = 100", "teams = 0"), "pool.teams", "at least 1"),
    (("teams = 100", "teams = 1.5"), "pool.teams", "whole number"),
    (("seed = 7", "seed = -1"), "pool.seed", "at least 0"),
    (("seed = 7\n", ""), "pool.seed", "missing"),
    (("seed = 7", "seed = 7\nkits = [8, 7]"), "pool.kits", "multiple"),
    (("\"fair\"]", "\"fair\", \"fast\"]"), "pool.algorithms", "unknown"),
])
def test_malformed_top_level_fields(tmp_path, replace, field, words):
    with pytest.raises(ProtocolError) as caught:
        PoolSpec.from_protocol(write(tmp_path, MINIMAL.replace(*replace)))
    assert caught.value.field == field and words in str(caught.value)


def test_fea_needs_ordered_bounds_and_their_source(tmp_path):
    fea = MINIMAL.replace("\"fair\"]", "\"fair\", \"fea\"]")
    with pytest.raises(ProtocolError, match=r"pool\.fea\.bounds: missing"):
        PoolSpec.from_protocol(write(tmp_path, fea))
    with pytest.raises(ProtocolError, match="hi must be greater than lo") as caught:
        PoolSpec.from_protocol(write(tmp_path, fea + "[pool.fea]\nbounds = [2.0, 1.0]\n"
                                                      "bounds_source = \"x\"\n"))
    assert caught.value.line == fea.count("\n") + 2
    with pytest.raises(ProtocolError, match="bounds_source: missing"):
        PoolSpec.from_protocol(write(tmp_path, fea + "[pool.fea]\nbounds = [0.0, 1.0]\n"))


def test_a_fair_gap_filter_needs_the_fair_and_efficient_policies(tmp_path):
    text = MINIMAL.replace("\"efficient\", \"fair\"", "\"efficient\"")
    with pytest.raises(ProtocolError, match="needs both 'efficient' and 'fair'"):
        PoolSpec.from_protocol(write(tmp_path, text + "[pool.teammate]\n"
                                                      "fair_gap_above = 0.6\n"))


def test_a_protocol_without_a_pool_section_is_refused(tmp_path):
    with pytest.raises(ProtocolError, match="no \\[pool\\] section"):
        PoolSpec.from_protocol(write(tmp_path, "[study]\nname = \"x\"\n"))


# --- team types ---------------------------------------------------------------------------


def test_team_types_follow_model_md():
    # human 0 is most capable (0.9 at letters); positive = best at the type they prefer
    c = np.array([[[0.2, 0.9], [0.3, 0.7]]] * 4)
    p = np.array([
        [[0.8, 0.1], [0.2, 0.6]],   # top negative, other positive -> mixed
        [[0.1, 0.8], [0.2, 0.6]],   # both positive -> twins
        [[0.8, 0.1], [0.6, 0.2]],   # both negative -> negative
        [[0.1, 0.8], [0.6, 0.2]],   # top positive, other negative -> mixed-reversed
    ])
    assert [TEAM_TYPES[k] for k in team_type_codes(c, p)] == list(TEAM_TYPES)
    assert most_capable_human(c).tolist() == [0, 0, 0, 0]
    assert most_capable_human(c[:, ::-1]).tolist() == [1, 1, 1, 1]


def test_ties_go_to_the_lowest_index():
    c = np.array([[[0.5, 0.2], [0.5, 0.2]], [[0.4, 0.6], [0.6, 0.4]]])
    # team 0: equal advantages; team 1: the summed capabilities tie, so t* is type 0
    assert most_capable_human(c).tolist() == [0, 1]
    # human 0's most capable and most preferred types both tie to type 0: positive
    c = np.array([[[0.5, 0.5], [0.5, 0.2]]])
    p = np.array([[[0.3, 0.3], [0.9, 0.1]]])
    assert TEAM_TYPES[team_type_codes(c, p)[0]] == "twins"


def test_most_capable_human_by_comparative_advantage_or_highest_coefficient():
    # best type t* = letters (summed 1.75); human 1 has the higher single coefficient
    # (0.95) but human 0 the larger advantage on letters (0.8 - 0.1 against 0.95 - 0.6)
    c = np.array([[[0.1, 0.8], [0.6, 0.95]]])
    assert comparative_advantage(c)[0].tolist() == pytest.approx([0.7, 0.35])
    assert most_capable_human(c).tolist() == [0]
    assert most_capable_human(c, COMPARATIVE_ADVANTAGE).tolist() == [0]
    assert most_capable_human(c, HIGHEST_COEFFICIENT).tolist() == [1]
    # three types: t* = type 2 (summed 1.5); advantages 0.9 - 0.3 and 0.6 - 0.05
    c3 = np.array([[[0.5, 0.1, 0.9], [0.0, 0.1, 0.6]]])
    assert comparative_advantage(c3)[0].tolist() == pytest.approx([0.6, 0.55])
    with pytest.raises(ValueError, match="unknown reading"):
        most_capable_human(c, "tallest")


def test_the_reading_decides_the_team_type():
    c = np.array([[[0.1, 0.8], [0.6, 0.95]]])
    p = np.array([[[0.9, 0.1], [0.1, 0.9]]])   # human 0 negative, human 1 positive
    assert TEAM_TYPES[team_type_codes(c, p)[0]] == "mixed"
    assert TEAM_TYPES[team_type_codes(c, p, HIGHEST_COEFFICIENT)[0]] == "mixed-reversed"


def test_average_ranks_share_ties_like_spearman():
    values = np.array([[0.3, 0.1, 0.3, 0.7]])
    assert average_ranks(values).tolist() == [[2.5, 1.0, 2.5, 4.0]]


def test_a_protocol_names_the_reading_and_the_metadata_form_keeps_it(tmp_path):
    spec = spec_from(tmp_path, 'most_capable_reading = "highest-coefficient"\n')
    assert spec.most_capable_reading == HIGHEST_COEFFICIENT
    assert PoolSpec.from_dict(spec.to_dict()).most_capable_reading == HIGHEST_COEFFICIENT
    assert spec_from(tmp_path, "").most_capable_reading == COMPARATIVE_ADVANTAGE
    assert spec.digest() != spec_from(tmp_path, "").digest()
    with pytest.raises(ProtocolError, match=r"pool\.most_capable_reading"):
        spec_from(tmp_path, 'most_capable_reading = "tallest"\n')


def test_more_task_types_use_spearman():
    c = np.array([[[0.1, 0.5, 0.9], [0.2, 0.4, 0.3]]])
    p = np.array([[[0.2, 0.3, 0.1], [0.1, 0.9, 0.5]]])
    # human 0: ranks (1,2,3) vs (2,3,1) -> negative; human 1: (1,3,2) vs (1,3,2) -> positive
    assert TEAM_TYPES[team_type_codes(c, p)[0]] == "mixed"


def test_criteria_mask_checks_intervals_types_and_gap():
    c = np.array([[[0.25, 0.7], [0.3, 0.9]], [[0.5, 0.7], [0.3, 0.9]]])
    p = np.full_like(c, 0.5)
    intervals = (((0.2, 0.32), (0.63, 1.0)),) * 2
    codes = team_type_codes(c, p)
    assert Criteria(c=intervals).mask(c, p, codes).tolist() == [True, False]
    gap = Criteria(fair_gap_above=0.6)
    assert gap.mask(c, p, codes, np.array([0.61, 0.6])).tolist() == [True, False]
    with pytest.raises(ValueError, match="needs the fair gaps"):
        gap.mask(c, p, codes)
