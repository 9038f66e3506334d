"""The bonus export's lines read back."""

from __future__ import annotations

import csv
import io
from pathlib import Path


def details(out: Path) -> list[tuple[str, str, float]]:
    """(code, reason, amount) of every line of bonus-details.csv."""
    text = (out / "bonus-details.csv").read_bytes().decode()
    return [(row["code"], row["reason"], float(row["amount"]))
            for row in csv.DictReader(io.StringIO(text, newline=""))]
