"""The report page as people read it: wide tables stay on the page (scrolling in their own
box on a screen, narrowed to fit when printed), and its text and figure colours pass WCAG
AA contrast against the page."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.patches
import numpy as np
import pandas as pd
import pytest

from analysis import figures, report

WHITE = "#ffffff"
# A4 landscape less the report's 10 mm print margins, in CSS pixels (96 per inch).
PRINTED_WIDTH = round((297 - 2 * 10) / 25.4 * 96)


def contrast(first: str, second: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb (or #rgb) colours."""
    def luminance(colour: str) -> float:
        digits = colour.lstrip("#")
        digits = "".join(d * 2 for d in digits) if len(digits) == 3 else digits
        channels = [int(digits[k:k + 2], 16) / 255 for k in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
                  for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_of_known_pairs():
    assert contrast("#000000", WHITE) == pytest.approx(21.0)
    assert contrast("#777777", WHITE) == pytest.approx(4.48, abs=0.01)  # just below AA
    assert contrast("#222", "#fff") == contrast("#222222", WHITE)


def test_every_text_colour_of_the_page_passes_aa_on_its_background():
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", report.STYLE)
    checked = 0
    for selector, body in rules:
        text = re.search(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{3,6})\b", body)
        if text is None:
            continue
        background = re.search(r"background:\s*(#[0-9a-fA-F]{3,6})\b", body)
        ratio = contrast(text.group(1), background.group(1) if background else WHITE)
        assert ratio >= 4.5, f"{selector.strip()}: {ratio:.2f}:1"
        checked += 1
    assert checked >= 2  # the body text and the captions at least


def test_every_figure_colour_stands_out_from_the_page():
    for colour in (*figures.COLOURS.values(), *figures.PALETTE, figures.OUTLINE):
        assert contrast(colour, WHITE) >= 3.0, colour  # WCAG AA for graphics


def test_every_likert_segment_is_told_from_the_page_by_its_fill_or_its_outline():
    counts = pd.DataFrame({"label": "Cap-Agree", "condition": ["fair"] * 7,
                           "value": np.arange(1, 8), "n": 1})
    figure = figures.likert_figure(counts)
    segments = [patch for patch in figure.axes[0].patches
                if isinstance(patch, matplotlib.patches.Rectangle) and patch.get_width()]
    assert len(segments) == 7
    for segment in segments:
        fill = matplotlib.colors.to_hex(segment.get_facecolor())
        edge = matplotlib.colors.to_hex(segment.get_edgecolor())
        assert contrast(fill, WHITE) >= 3.0 or (
            contrast(edge, WHITE) >= 3.0 and contrast(edge, fill) >= 3.0), (fill, edge)


def wide_table(columns: int) -> pd.DataFrame:
    """Six sessions of ``columns`` measures named like the report's, values like its."""
    names = ["FE_rate_cumulative_advantage", "F_lead_changes", "rounds_recovered",
             "placed_in_target_team", "participant_human"]
    rng = np.random.default_rng(3)
    return pd.DataFrame({f"{names[k % len(names)]}_{k}": rng.normal(0, 2, 6)
                         for k in range(columns)})


def wide_report(path: Path) -> Path:
    """A report with a table as wide as the report's widest (19 columns), one far wider
    (32), and metadata with a long unbroken line."""
    section = report.Section("Sessions", "Wide tables.", [
        ("Per session", wide_table(19)), ("Everything", wide_table(32))])
    path.write_text(report.render("Study report", [section], {"database": "x" * 300}))
    return path


def measure(page) -> dict:
    return page.evaluate("""() => {
        const root = document.documentElement;
        return {page: root.scrollWidth, viewport: root.clientWidth,
                tables: [...document.querySelectorAll('.scroll')].map(box => ({
                    table: box.querySelector('table').scrollWidth, box: box.clientWidth,
                    scrolls: getComputedStyle(box).overflowX}))};
    }""")


@pytest.mark.browser
def test_a_wide_table_scrolls_in_its_box_on_screen_and_fits_the_printed_page(tmp_path):
    from playwright.sync_api import sync_playwright
    from support.web import CHROMIUM, CHROMIUM_ARGS

    page_file = wide_report(tmp_path / "report.html")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for width in (1280, 390):  # a desktop and a phone
            page = browser.new_page(viewport={"width": width, "height": 844})
            page.goto(page_file.as_uri())
            seen = measure(page)
            assert seen["page"] == seen["viewport"] == width, seen  # nothing runs off
            assert all(box["table"] > box["box"] and box["scrolls"] == "auto"
                       for box in seen["tables"]), seen
            page.screenshot(path=str(tmp_path / f"screen-{width}.png"))
            page.close()
        page = browser.new_page(viewport={"width": PRINTED_WIDTH, "height": 700})
        page.goto(page_file.as_uri())
        page.emulate_media(media="print")
        seen = measure(page)
        assert seen["page"] == PRINTED_WIDTH, seen
        assert all(box["table"] <= box["box"] for box in seen["tables"]), seen
        page.pdf(path=str(tmp_path / "report.pdf"), print_background=True,
                 prefer_css_page_size=True)
        browser.close()
    assert (tmp_path / "report.pdf").stat().st_size > 0


def test_a_figure_is_cut_to_its_ink_in_png_and_no_closer_in_svg(tmp_path: Path):
    def labelled() -> matplotlib.figure.Figure:
        figure, axis = figures.plt.subplots(figsize=(4, 3))
        axis.plot([0, 1], [0, 1])
        axis.set_ylabel("a label far out to the left, in words people read")
        figure.text(0.98, 0.5, "a note past the right edge", fontsize=12)
        return figure

    png = figures.save(labelled(), tmp_path / "ours", "cut")
    tight = tmp_path / "tight"
    tight.mkdir()
    for suffix, dpi in (("png", figures.PNG_DPI), ("svg", None)):
        figure = labelled()
        figure.savefig(tight / f"cut.{suffix}", dpi=dpi, bbox_inches="tight")
        figures.plt.close(figure)
    ours, theirs = figures.plt.imread(png), figures.plt.imread(tight / "cut.png")
    assert ours.shape == theirs.shape and (ours == theirs).all()

    def svg_size(path: Path) -> tuple[float, float]:
        found = re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', path.read_text())
        assert found, path
        return float(found[1]), float(found[2])

    ours, theirs = svg_size(png.with_suffix(".svg")), svg_size(tight / "cut.svg")
    margin = 2 * 72 * figures.SVG_MARGIN
    assert all(t <= o <= t + margin + 0.02 * t for o, t in zip(ours, theirs, strict=True))
