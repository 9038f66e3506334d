"""Readable text on a theme's colour: WCAG 2 contrast ratios.

The page writes a theme's words (its badge on the themes page, the letters on a cookie) on
the theme's icing colour, in dark ink or in white, whichever contrasts more. A study's
colours are the protocol's to choose, so ``study check`` refuses a colour on which neither
reaches the AA ratio for ordinary text, and the page gets the ink to use with each colour.
"""

from __future__ import annotations

import functools

# WCAG 2 success criterion 1.4.3 (AA): ordinary text needs 4.5:1; the badges are 17 px.
AA_RATIO = 4.5
DARK_INK = "#3b2418"  # the page's ink (static/css/bakery.css --ink)
LIGHT_INK = "#ffffff"


def _channel(value: int) -> float:
    """One sRGB channel (0..255) made linear, as WCAG 2 defines it."""
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(colour: str) -> float:
    """The relative luminance of a ``#rrggbb`` colour, 0 (black) to 1 (white)."""
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _channel(red) + 0.7152 * _channel(green) + 0.0722 * _channel(blue)


def contrast(first: str, second: str) -> float:
    """The WCAG 2 contrast ratio of two colours, 1 to 21."""
    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


@functools.cache
def ink_on(colour: str) -> str:
    """The ink the page writes with on ``colour``: dark or white, whichever contrasts more
    (cached: every cookie a page is pushed names its theme's)."""
    return max((DARK_INK, LIGHT_INK), key=lambda ink: contrast(colour, ink))
