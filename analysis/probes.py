"""Round probes: what each person answered between rounds, beside the fairness of the rounds
they had just lived through.

A probe (the protocol's ``[[probes]]``) asks one question on a scale after a round; its
answers are stored per person, session, round and probe (the ``probes`` table, missing in
a database of a study without probes). A robot's allocations are felt round by round
(Claure et al., 2024), and seed 001 separates short-term fairness (a recent window) from
long-term fairness (the whole history), so each answer is set beside the person's running
``F`` and ``FE`` after that round, the shares of their rounds so far on their most capable
and most preferred type, the kit of the round just played, and ``F`` over the last
``WINDOW`` rounds; a mixed model asks which of these the answers follow, and the
end-of-session questionnaire is set beside the session's last and mean probe answer.
"""

from __future__ import annotations

import sqlite3
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import fairness_time, figures, metrics, models, pooling, sessions
from analysis.load import StudyData
from study.allocation.model import all_metrics, most_capable_type, most_preferred_type

TABLE = "probes"
WINDOW = metrics.DEFAULT_WINDOW  # seed 001's short term: the last 2 rounds
DEFAULT_POINTS = 7
# The fairness of the rounds up to the probe, per person and round (participant as human
# 0: a signed F or FE favours them when positive), in the order the figure shows them.
METRICS = (("F", "running F"), ("F_recent", f"F of the last {WINDOW} rounds"),
           ("FE_rate", "running FE / t"), ("capable_share", "share of rounds on capable type"),
           ("preferred_share", "share of rounds on preferred type"),
           ("last_capable", "last kit on capable type (share)"),
           ("last_preferred", "last kit on preferred type (share)"))
COLUMNS = ["id", "participant_id", "session_id", "round_id", "session_number",
           "round_number", "probe", "shown_at", "deadline", "answered_at", "value", "missed"]


@dataclass(frozen=True)
class Probe:
    """A declared probe as the analysis needs it: its words and its scale's points."""

    id: str
    text: str
    points: int = DEFAULT_POINTS


def declared(protocol_texts: Mapping[str, str]) -> dict[str, Probe]:
    """The protocol's ``[[probes]]`` by id, read from its stored text (its scale's points
    from ``[scales.*]``); none for a protocol without probes or several protocols."""
    if len(protocol_texts) != 1:
        return {}
    raw = tomllib.loads(next(iter(protocol_texts.values())))
    scales = raw.get("scales", {})
    return {str(entry["id"]): Probe(str(entry["id"]), str(entry.get("text", entry["id"])),
                                    int(scales.get(entry.get("scale", ""), {}).get(
                                        "points", DEFAULT_POINTS)))
            for entry in raw.get("probes", [])}


def _read_one(path: Path) -> pd.DataFrame:
    with sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True) as connection:
        present = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                     "name = ?", (TABLE,)).fetchone()
        if present is None:
            return pd.DataFrame(columns=COLUMNS)
        return pd.read_sql_query(f"SELECT {', '.join(COLUMNS)} FROM {TABLE}", connection)


def read(metadata: Mapping[str, Any]) -> pd.DataFrame:
    """Every probe row of the study's database, or of each pooled database with its ids
    offset and its site as ``pooling.combine`` gives them; empty where the table is not."""
    if "databases" not in metadata:
        path = metadata.get("database")
        return _read_one(Path(path)) if path else pd.DataFrame(columns=COLUMNS)
    parts = []
    for k, (record, site) in enumerate(zip(metadata["databases"], metadata["sites"],
                                           strict=True)):
        part = _read_one(Path(record["database"]))
        for column in pooling.ID_COLUMNS:
            part[column] = part[column] + k * pooling.ID_OFFSET
        parts.append(part.assign(site=site))
    return pd.concat(parts, ignore_index=True)


def round_fairness(data: StudyData) -> pd.DataFrame:
    """Per collaborative session and round, what the participant had lived through by its
    end: ``fairness_time``'s running metrics, ``F`` of the last ``WINDOW`` rounds' kits,
    the shares of their rounds so far on their most capable and most preferred type, and
    whether the round's own kit was either (1 or 0)."""
    played = sessions.collaborative(data.sessions)
    c, p = sessions.team_arrays(played)
    kits = sessions.trajectories(played, data.allocations, c.shape[-1], c.shape[1])
    frame = fairness_time.rounds_frame(c, p, kits)[["unit", "round", "F", "FE", "FE_rate"]]
    window, _ = metrics.window_kits(kits, WINDOW)
    frame["F_recent"] = all_metrics(c[:, None], p[:, None], window)["F"].ravel()
    own = kits[:, 1:, 0, :]
    last = own - kits[:, :-1, 0, :]
    rounds = np.arange(1, own.shape[1] + 1)
    for name, best in (("capable", most_capable_type(c[:, 0])),
                       ("preferred", most_preferred_type(p[:, 0]))):
        index = np.broadcast_to(best[:, None, None], (*own.shape[:2], 1))
        frame[f"{name}_share"] = (np.take_along_axis(own, index, -1)[..., 0] / rounds).ravel()
        frame[f"last_{name}"] = np.take_along_axis(last, index, -1)[..., 0].ravel()
    keys = played[["participant_id", "session_id", "condition", "number",
                   *[c for c in ("site", "team_id") if c in played]]]
    keys = keys.rename(columns={"number": "period"})
    return keys.iloc[frame.pop("unit")].reset_index(drop=True).join(frame)


def answers(probes: pd.DataFrame, data: StudyData) -> pd.DataFrame:
    """The probes asked in the analysed sessions, one row each, beside the fairness of the
    rounds up to theirs (answered or missed: ``value`` is NaN when missed)."""
    asked = probes[["session_id", "round_number", "probe", "value", "missed"]].rename(
        columns={"round_number": "round"})
    merged = round_fairness(data).merge(asked, on=["session_id", "round"], how="inner")
    return merged.astype({"value": float, "missed": int})


def means_by_round(frame: pd.DataFrame) -> pd.DataFrame:
    """Per probe, condition and round: how many were asked, answered and missed, the mean
    answer with its 95% interval (normal), and the mean of each fairness measure over the
    same answered person-rounds."""
    groups = frame.groupby(["probe", "condition", "round"])
    table = groups.agg(asked=("value", "size"), answered=("value", "count"),
                       missed=("missed", "sum"), mean=("value", "mean"), sd=("value", "std"))
    table["ci"] = 1.96 * table["sd"] / np.sqrt(table["answered"].clip(lower=1))
    measures = frame.dropna(subset=["value"]).groupby(["probe", "condition", "round"])[
        [name for name, _ in METRICS]].mean()
    return table.join(measures).reset_index()


def fit(frame: pd.DataFrame) -> pd.DataFrame:
    """Each probe's mixed model: its answers on every fairness measure and the round, with
    the condition as a factor and a random intercept per participant."""
    covariates = [*[name for name, _ in METRICS], "round"]
    fitted = [models.slopes_model(part, "value", covariates, label=probe)
              for probe, part in frame.groupby("probe", sort=True)]
    return pd.concat(fitted, ignore_index=True) if fitted else pd.DataFrame(
        columns=models.ORDINAL_COLUMNS)


def session_items(frame: pd.DataFrame, rated: pd.DataFrame) -> pd.DataFrame:
    """Per probe, end-of-session item and condition: the sessions with both, the item's
    mean beside the session's last and mean probe answer, and Spearman's correlation of
    the item with each (NaN below 3 sessions)."""
    answered = frame.dropna(subset=["value"]).sort_values("round")
    per_session = answered.groupby(["probe", "session_id", "condition"]).agg(
        probe_last=("value", "last"), probe_mean=("value", "mean")).reset_index()
    items = rated[["session_id", "item", "value"]].rename(columns={"value": "item_value"})
    paired = per_session.merge(items, on="session_id")
    rows = []
    for (probe, item, condition), part in paired.groupby(["probe", "item", "condition"]):
        enough = len(part) >= 3
        rows.append({"probe": probe, "item": item, "condition": condition,
                     "sessions": len(part), "item_mean": part["item_value"].mean(),
                     "probe_last_mean": part["probe_last"].mean(),
                     "probe_mean_mean": part["probe_mean"].mean(),
                     **{f"rho_{kind}": part["item_value"].corr(part[f"probe_{kind}"],
                                                               method="spearman")
                        if enough else np.nan for kind in ("last", "mean")}})
    return pd.DataFrame(rows)


def section(data: StudyData, rated: pd.DataFrame, out: Path,
            colours: Mapping[str, str]) -> dict[str, Any] | None:
    """The report's section on the probes (title, text, tables, figures, warnings), or None
    when the study asked none."""
    probes = read(data.metadata)
    if probes.empty:
        return None
    declared_probes = declared(data.protocol_texts)
    known = {name: declared_probes.get(name, Probe(name, name))
             for name in sorted(probes["probe"].unique())}
    frame = answers(probes, data)
    text = (f"Probes asked between rounds ({', '.join(known)}), "
            f"{len(probes)} asked in all. Each answer is set beside what the person had "
            "lived through by the end of that round: the running F and FE / t (signed, "
            "positive favours them), F of the last "
            f"{WINDOW} rounds' kits (seed 001's short term; the running F is its long term), "
            "the shares of their rounds so far on their most capable and most preferred "
            "type, and whether the round's own kit was either. The figures show each "
            "probe's mean answer by round and condition, and against the same rounds' mean "
            "fairness. The mixed model takes every measure and the round as slopes, the "
            "condition as a factor and a random intercept per participant; the slopes' p "
            "values are Holm-adjusted over the probe's slopes, the conditions' over their "
            "pairs. The end-of-session items are set beside the session's last and mean "
            "probe answer (Spearman's rho by condition).")
    if frame.empty:
        return {"title": "Round probes", "text": text + " No probe was asked in an analysed "
                "session.", "tables": [], "figures": [], "warnings": []}
    means = means_by_round(frame)
    fitted = fit(frame)
    tables = [("Probe answers by round and condition", means),
              ("Probe answers on the fairness so far (mixed models)", fitted),
              ("End-of-session items beside the probes",
               session_items(frame, rated))]
    shown = [(f"{probe.id}: {probe.text}", figures.save(figures.probe_figure(
        means[means["probe"] == probe.id], f"{probe.id}: {probe.text}", probe.points,
        METRICS, colours), out, f"probe_{_slug(probe.id)}")) for probe in known.values()
        if probe.id in set(means["probe"])]
    warnings = sorted({w for w in fitted["warning"].dropna() if w})
    return {"title": "Round probes", "text": text, "tables": tables, "figures": shown,
            "warnings": warnings}


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
