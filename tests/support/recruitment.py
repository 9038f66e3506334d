"""The demo as a Prolific study, and the ids and codes its links carry."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from support.web import DEMO

COMPLETE = "https://app.prolific.com/submissions/complete?cc=C0MPL3TE"
RETURN = "https://app.prolific.com/submissions/complete?cc=RETURNED"


def recruitment_protocol(out: Path, open_enrolment: bool = False) -> Path:
    """The demo protocol as a Prolific study: ids, completion and return addresses."""
    text = DEMO.read_text().replace(
        "open_enrolment = true", "\n".join([
            f"open_enrolment = {str(open_enrolment).lower()}", 'id_parameter = "PROLIFIC_PID"',
            f'completion_url = "{COMPLETE}"', f'return_url = "{RETURN}"',
            "unconsented_expiry_minutes = 30", "binding_idle_minutes = 20"]), 1)
    out.write_text(text)
    return out


def pid(name: str) -> str:
    """A Prolific participant id (24 hexadecimal digits) standing for ``name``."""
    return hashlib.sha256(name.encode()).hexdigest()[:24]


def code_of(reply: Any) -> str:
    return re.search(r"/p/([^/?#]+)", reply.headers["Location"]).group(1)
