"""Whether the study measured its people: capabilities against the target ranges.

A capability is a speed over the protocol's reference speed, clipped to [0.01, 0.99]; a
clipped value is not a measurement, and values piled against a range's edge say the
reference speed does not fit the people measured (docs/pilot-to-study.md). This section
shows each cookie type's measured capabilities against the range the protocol's pool
samples it from, counts the clipped ones, and says where the reference speeds in use came
from: a pilot (the protocol's ``[calibration]`` block) or the model's defaults.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import figures
from analysis.design import loaded_protocol
from analysis.flow import clipped_ids
from analysis.load import StudyData
from study.calibration.pilot import OFF_SHARE, pool_target
from study.protocol.loader import TASK_NAMES
from study.task.decorator import HIGHEST, LOWEST

CONSEQUENCES = {"continue": "the participant continues and the analysis leaves them out, "
                            "rule clipped-capability",
                "unmatched": "the unmatched page once practice ends, before a team is formed",
                "keep": "the participant continues on the clipped value, flagged, stays in "
                        "the analysis, and every confirmatory result is also given without "
                        "them"}
MODEL_DEFAULTS = ("model defaults: the protocol has no [calibration] block, so its reference "
                  "speeds come from the human decorating-speed model (docs/human-model.md), "
                  "not from people")


def protocol_text(data: StudyData, protocol_file: Path | None) -> str | None:
    """The protocol the report describes: the file given, else the database's snapshot."""
    if protocol_file is not None:
        return protocol_file.read_text(encoding="utf-8")
    if len(data.protocol_texts) == 1:
        return next(iter(data.protocol_texts.values()))
    return None


def target_ranges(text: str | None) -> dict[str, tuple[float, float]]:
    """Per cookie type, the range the protocol's pool samples capabilities from."""
    protocol = loaded_protocol(text) if text else None
    if protocol is None:
        return {}
    return {name: pool_target(protocol, j) for j, name in enumerate(TASK_NAMES)}


def provenance(text: str | None) -> tuple[str, pd.DataFrame]:
    """Where the reference speeds came from, and the values a calibration changed."""
    block = tomllib.loads(text).get("calibration") if text else None
    if not block:
        return (MODEL_DEFAULTS if text else "unknown: no protocol to read"), pd.DataFrame()
    changes = [change.split(": ", 1) for change in block.get("changes", [])]
    table = pd.DataFrame([(key, *value.split(" -> ", 1)) for key, value in changes],
                         columns=["value", "old", "new"])
    return (f"calibrated by `study calibrate` from the pilot {block['pilot']} (sha256 "
            f"{block['pilot_sha256'][:16]}, {block['participants']} participants measured "
            f"{block['first']} to {block['last']}); rule: {block['rule']}"), table


def capability_table(practice: pd.DataFrame,
                     ranges: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Per cookie type: the measured capabilities against the target range, clip counts."""
    rows = []
    for name, part in practice.groupby("task_name", sort=False):
        values = part["capability"].astype(float)
        lo, hi = ranges.get(str(name), (np.nan, np.nan))
        low, high = int((values <= LOWEST).sum()), int((values >= HIGHEST).sum())
        outside = int(((values < lo) | (values > hi)).sum()) if ranges else 0
        rows.append({
            "type": name, "target_lo": lo, "target_hi": hi,
            "reference_speed": ", ".join(f"{v:g}" for v in sorted(part["reference_speed"]
                                                                  .dropna().unique())),
            "measured": len(values), "median": values.median(), "min": values.min(),
            "max": values.max(), "inside": len(values) - outside if ranges else None,
            "clipped_low": low, "clipped_high": high,
            "clipped_or_outside": int(((values <= LOWEST) | (values >= HIGHEST)
                                       | (values < lo) | (values > hi)).sum())})
    return pd.DataFrame(rows)


def clipped_consequence(text: str | None) -> str:
    """What the protocol declares follows a clipped capability (its default: continue)."""
    study = tomllib.loads(text).get("study", {}) if text else {}
    return str(study.get("clipped_capability", "continue"))


def clipped_outcomes(data: StudyData, consequence: str) -> pd.DataFrame:
    """The participants with a clipped capability and what followed: continued in the study
    and left out of the analysis (rule clipped-capability), continued and kept in it
    (``keep``), or the unmatched page."""
    clipped = clipped_ids(data.practice)
    steps = data.participants.set_index("participant_id")["step"]
    unmatched = sum(steps.get(pid) == "unmatched" for pid in clipped)
    continued = len(clipped) - unmatched
    kept = consequence == "keep"
    return pd.DataFrame([{"clipped_capability": consequence,
                          "participants_with_a_clipped_capability": len(clipped),
                          "continued_left_out_of_the_analysis": 0 if kept else continued,
                          "continued_kept_in_the_analysis": continued if kept else 0,
                          "met_the_unmatched_page": unmatched}])


def capability_figure(practice: pd.DataFrame,
                      ranges: dict[str, tuple[float, float]]) -> Figure:
    """One panel per cookie type: the measured capabilities, the target range shaded and
    the clip bounds dashed."""
    names = [name for name in TASK_NAMES if name in set(practice["task_name"])]
    figure, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.2),
                                squeeze=False)
    bins = np.linspace(0, 1, 51)
    for k, (axis, name) in enumerate(zip(axes[0], names, strict=True)):
        values = practice.loc[practice["task_name"] == name, "capability"].astype(float)
        if name in ranges:
            axis.axvspan(*ranges[name], facecolor="#c7e9c0", edgecolor="#238b45",
                         label="target range")  # a light band, edged to stand out
        axis.hist(values, bins=bins, color=figures.colour(name, k), alpha=0.85,
                  label="measured")
        for bound in (LOWEST, HIGHEST):
            axis.axvline(bound, color="#555555", linestyle="--", linewidth=0.8)
        clipped = int(((values <= LOWEST) | (values >= HIGHEST)).sum())
        axis.set_title(f"{name}: {len(values)} measured, {clipped} clipped", fontsize=9)
        axis.set_xlim(0, 1)
        axis.set_xlabel("capability")
        axis.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel("participants")
    axes[0][0].legend(fontsize=8, frameon=False)
    return figure


def section(data: StudyData, protocol_file: Path | None, out: Path) -> dict[str, Any] | None:
    """The report section's parts (title, text, tables, figures, warnings), or None when
    no practice was measured."""
    measured = data.practice[data.practice["measured"].astype(bool)]
    if measured.empty:
        return None
    text = protocol_text(data, protocol_file)
    ranges = target_ranges(text)
    table = capability_table(measured, ranges)
    source, changes = provenance(text)
    warnings = [f"{row.type}: {row.clipped_or_outside} of {row.measured} capabilities are "
                f"clipped or outside the target range: the reference speed may not fit the "
                f"people measured; calibrate from a pilot (docs/pilot-to-study.md)."
                for row in table.itertuples()
                if row.clipped_or_outside > OFF_SHARE * row.measured]
    consequence = clipped_consequence(text)
    tables = [("Measured capabilities per cookie type", table)]
    if not changes.empty:
        tables.append(("Values the calibration changed", changes))
    tables.append(("Clipped capabilities and what followed", clipped_outcomes(data,
                                                                              consequence)))
    return {"title": "Calibration: measured capabilities against the target ranges",
            "text": ("Every participant with a measured practice round, before exclusions "
                     "(the measure is the same for all). A capability is the round's speed "
                     "over the reference speed, clipped to [0.01, 0.99]: a clipped value is "
                     "not a measurement, and the protocol declares what follows from it "
                     f"(clipped_capability = {consequence}: "
                     f"{CONSEQUENCES.get(consequence, 'unknown')}). Target range: the range "
                     "the protocol's pool samples the type from. Reference speeds in use: "
                     + source + "."),
            "tables": tables,
            "figures": [("Measured capabilities and the target ranges", figures.save(
                capability_figure(measured, ranges), out, "calibration"))],
            "warnings": warnings}
