"""The report counts the analysis set once: its headline and its participants section give
the same number, the participants whose sessions are analysed."""

import json
import re
from pathlib import Path

from support.analysis import make_database

from analysis import cli
from study.storage.database import Storage

STUDY1 = Path(__file__).resolve().parents[2] / "protocols" / "study1.toml"


def test_the_analysis_set_has_one_count_everywhere(tmp_path):
    database = make_database(tmp_path / "study.sqlite")
    storage = Storage(database)
    # Consented and stopped before the sessions: no rule of study1 excludes them, and
    # they have no session to analyse.
    storage.insert("participants", {
        "code": "early", "protocol": "study1", "created_at": 5.0, "step": "themes",
        "consent": "given", "consent_at": 5.0,
        "condition_order": json.dumps(["efficient", "fair"])})
    storage.close()
    out = tmp_path / "out"
    assert cli.main(["report", str(database), "--protocol", str(STUDY1), "--out",
                     str(out)]) == 0
    text = re.sub(r"<[^>]+>", " ", (out / "report.html").read_text())
    assert re.findall(r"(\d+) participants in the analysis set", text) == ["4", "4"]
