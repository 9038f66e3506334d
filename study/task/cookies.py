"""What a finished cookie must look like, so the server can check it before counting it,
and the bots, the human model and the analysis can decorate and measure it.

Letters cookies spell the theme's text with whole letters; squares cookies draw the theme's
initials box by box on a grid, from a small built-in 3x5 pixel font.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from study.protocol.colours import ink_on
from study.protocol.loader import TASK_NAMES, Protocol

GLYPH_ROWS, GLYPH_COLS = 5, 3
FONT: dict[str, tuple[str, ...]] = {
    "A": ("###", "#.#", "###", "#.#", "#.#"), "B": ("##.", "#.#", "##.", "#.#", "##."),
    "C": ("###", "#..", "#..", "#..", "###"), "D": ("##.", "#.#", "#.#", "#.#", "##."),
    "E": ("###", "#..", "##.", "#..", "###"), "F": ("###", "#..", "##.", "#..", "#.."),
    "G": ("###", "#..", "#.#", "#.#", "###"), "H": ("#.#", "#.#", "###", "#.#", "#.#"),
    "I": ("###", ".#.", ".#.", ".#.", "###"), "J": ("..#", "..#", "..#", "#.#", "###"),
    "K": ("#.#", "#.#", "##.", "#.#", "#.#"), "L": ("#..", "#..", "#..", "#..", "###"),
    "M": ("#.#", "###", "###", "#.#", "#.#"), "N": ("##.", "#.#", "#.#", "#.#", "#.#"),
    "O": ("###", "#.#", "#.#", "#.#", "###"), "P": ("###", "#.#", "###", "#..", "#.."),
    "Q": ("###", "#.#", "#.#", "###", "..#"), "R": ("##.", "#.#", "##.", "#.#", "#.#"),
    "S": ("###", "#..", "###", "..#", "###"), "T": ("###", ".#.", ".#.", ".#.", ".#."),
    "U": ("#.#", "#.#", "#.#", "#.#", "###"), "V": ("#.#", "#.#", "#.#", "#.#", ".#."),
    "W": ("#.#", "#.#", "###", "###", "#.#"), "X": ("#.#", "#.#", ".#.", "#.#", "#.#"),
    "Y": ("#.#", "#.#", ".#.", ".#.", ".#."), "Z": ("###", "..#", ".#.", "#..", "###"),
    "0": ("###", "#.#", "#.#", "#.#", "###"), "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"), "3": ("###", "..#", ".##", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"), "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"), "7": ("###", "..#", "..#", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"), "9": ("###", "#.#", "###", "..#", "###"),
    "!": (".#.", ".#.", ".#.", "...", ".#."),
}
DISTRACTORS = "BDHKMUWY"


@functools.cache
def letters_of(text: str) -> str:
    """The letters a letters cookie needs: letters and digits of the text, upper case."""
    return re.sub(r"[^A-Z0-9]", "", text.upper())


@functools.cache
def squares_grid(initials: str) -> tuple[int, int, tuple[int, ...]]:
    """Rows, columns and the filled boxes (``row * cols + col``) drawing the initials, one
    blank column between letters (kept: every placed box is checked against it)."""
    cols = len(initials) * (GLYPH_COLS + 1) - 1
    cells = []
    for index, char in enumerate(initials.upper()):
        for row, line in enumerate(FONT[char]):
            cells.extend(row * cols + index * (GLYPH_COLS + 1) + col
                         for col, mark in enumerate(line) if mark == "#")
    return GLYPH_ROWS, cols, tuple(sorted(cells))


@functools.cache
def letters_tray(text: str) -> tuple[str, ...]:
    """The tray of letter tiles: every letter the text needs once, plus a few it does not."""
    letters = letters_of(text)
    extra = [c for c in DISTRACTORS if c not in letters][:3]
    return tuple(sorted(set(letters) | set(extra)))


def letters_target(text: str) -> dict[str, Any]:
    """The letters cookie as the browser shows it: the text, its letters and the tray."""
    return {"kind": "letters", "text": text.upper(), "letters": letters_of(text),
            "tray": list(letters_tray(text))}


def squares_target(initials: str) -> dict[str, Any]:
    rows, cols, cells = squares_grid(initials)
    return {"kind": "squares", "text": initials.upper(), "rows": rows, "cols": cols,
            "cells": list(cells)}


def matches(target: dict[str, Any], content: Any) -> bool:
    """Whether submitted content is a correctly finished cookie of ``target``."""
    if target["kind"] == "letters":
        return (isinstance(content, str) and len(content) <= 64
                and re.sub(r"\s", "", content.upper()) == target["letters"])
    if not isinstance(content, list) or len(content) > target["rows"] * target["cols"]:
        return False
    if not all(isinstance(cell, int) and not isinstance(cell, bool) for cell in content):
        return False
    return len(content) == len(set(content)) and sorted(content) == target["cells"]


def target(protocol: Protocol, task_type: int, theme_id: str | None = None,
           ) -> dict[str, Any]:
    """The finished cookie of a task type, decorated with the theme assigned to it: the
    round's own (``rounds.theme``), else the protocol's (rounds stored before themes were
    recorded per round); its icing colour and the ink that is readable on it."""
    theme = protocol.theme_of(task_type) if theme_id is None else protocol.theme(theme_id)
    icing = {"theme": theme.id, "colour": theme.colour, "ink": ink_on(theme.colour)}
    if TASK_NAMES[task_type] == "letters":
        return {**letters_target(theme.text), **icing}
    return {**squares_target(theme.initials), **icing}


def cookie_elements(protocol: Protocol, task_type: int, theme_id: str | None = None) -> int:
    """Elements (letters, or boxes) of a cookie of ``task_type`` with the theme."""
    finished = target(protocol, task_type, theme_id)
    return len(finished["letters"] if "letters" in finished else finished["cells"])


def theme_scale(protocol: Protocol, task_type: int, theme_id: str | None) -> float:
    """How many of the protocol's own cookies of ``task_type`` (its ``[cookies]`` theme,
    which the reference speed is in) one cookie with ``theme_id`` is worth: a theme with
    longer text makes a cookie of more elements. Themes assigned by rating would otherwise
    make the capability depend on the theme."""
    if theme_id is None or theme_id == protocol.cookies[task_type].theme:
        return 1.0
    return cookie_elements(protocol, task_type, theme_id) / cookie_elements(protocol, task_type)
