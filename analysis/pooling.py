"""Several study databases (sites, days) as one study, with the site as a factor.

Only studies run under the same protocol are pooled: the same name and, where the
databases hold snapshots of it, the same text. Anything else would mix designs (other
rounds, conditions or items), so it is refused with the reason. Identifiers are offset
per database so participants, sessions and rounds stay distinct.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.load import StudyData
from study.allocation.model import InvalidInput

ID_OFFSET = 10_000_000
ID_COLUMNS = ("participant_id", "session_id", "round_id")


def site_names(paths: Sequence[Path]) -> list[str]:
    """A short distinct name per database: its file stem, or its path where stems clash."""
    stems = [Path(path).stem for path in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [str(path) for path in paths]


def _sections(text: str) -> dict[str, object]:
    return tomllib.loads(text)


def protocol_mismatch(datasets: Sequence[StudyData], sites: Sequence[str]) -> str | None:
    """Why these databases cannot be pooled, or None when they can."""
    names = [tuple(data.metadata.get("protocols", [])) for data in datasets]
    for site, protocols in zip(sites, names, strict=True):
        if len(protocols) > 1:
            return f"{site} holds several protocols ({', '.join(protocols)})"
    distinct = {protocols for protocols in names if protocols}
    if len(distinct) > 1:
        listed = "; ".join(f"{site}: {', '.join(p) or 'none'}"
                           for site, p in zip(sites, names, strict=True))
        return f"the databases ran different protocols ({listed})"
    texts = [next(iter(data.protocol_texts.values()), None) for data in datasets]
    known = [(site, text) for site, text in zip(sites, texts, strict=True) if text]
    for site, text in known[1:]:
        if text != known[0][1]:
            first, other = _sections(known[0][1]), _sections(text)
            differ = sorted(key for key in set(first) | set(other)
                            if first.get(key) != other.get(key))
            return (f"protocol {', '.join(names[0])} differs between {known[0][0]} and "
                    f"{site} in section(s) {', '.join(differ) or '(formatting only)'}")
    return None


def _offset(frame: pd.DataFrame, k: int, site: str) -> pd.DataFrame:
    frame = frame.copy()
    for column in ID_COLUMNS:
        if column in frame:
            frame[column] = frame[column] + k * ID_OFFSET
    frame.insert(1, "site", site)
    return frame


def combine(datasets: Sequence[StudyData], sites: Sequence[str]) -> StudyData:
    """One ``StudyData`` of several databases run under the same protocol; every frame
    gains a ``site`` column. Raises ``InvalidInput`` with the reason otherwise."""
    if len(datasets) == 1:
        return datasets[0]
    reason = protocol_mismatch(datasets, sites)
    if reason:
        raise InvalidInput("databases", ", ".join(sites), f"cannot be pooled: {reason}")
    frames = {name: pd.concat([_offset(data.frames()[name], k, site)
                               for k, (data, site) in enumerate(zip(datasets, sites,
                                                                    strict=True))],
                              ignore_index=True)
              for name in datasets[0].frames()}
    metadata = {"databases": [data.metadata for data in datasets], "sites": list(sites),
                "protocols": sorted({p for data in datasets
                                     for p in data.metadata.get("protocols", [])})}
    texts: dict[str, str] = {}
    for data in datasets:
        texts.update(data.protocol_texts)
    return StudyData(**frames, metadata=metadata, protocol_texts=texts)
