"""The server's own 404, 500 and 503 pages are the study's: its language (``[texts]``), its
stylesheet, its frame; the console's stay the framework's English ones. Also in real
Chromium, on a desktop and a phone, for the German demo served by ``study serve``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from support.browser import PHONE, assert_fits, frame_styles, screenshot_directory
from support.web import CHROMIUM, CHROMIUM_ARGS, LiveServer, make_app
from werkzeug.exceptions import ServiceUnavailable

from study.protocol.loader import load_protocol
from study.storage.health import StorageUnavailable

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "protocols" / "demo.toml"
GERMAN = ROOT / "protocols" / "demo-de.toml"
STYLESHEET = '<link rel="stylesheet" href="/static/css/bakery.css">'


def study_app(tmp_path: Path, teammates, clock, protocol: Path):
    app = make_app(tmp_path, teammates, clock, protocol=protocol)
    app.config["PROPAGATE_EXCEPTIONS"] = False  # as served: a failure is a 500, not raised
    return app


def in_the_study(body: str, protocol: Path, title_key: str, text_key: str) -> None:
    """The page speaks the protocol's words, in its language, in the study's frame."""
    texts = load_protocol(protocol).texts
    assert f'<html lang="{texts["language"]}">' in body
    assert STYLESHEET in body and 'class="sign"' in body and 'class="card"' in body
    assert texts[title_key] in body and texts[text_key] in body


@pytest.mark.parametrize("protocol", [GERMAN, DEMO], ids=["de", "en"])
def test_an_unknown_address_gets_the_studys_404(tmp_path, teammates, clock, protocol):
    reply = study_app(tmp_path, teammates, clock, protocol).test_client().get("/no/such/page")
    assert reply.status_code == 404
    body = reply.get_data(as_text=True)
    in_the_study(body, protocol, "not_found_title", "not_found_text")
    assert "Not Found" not in body and "requested URL" not in body
    assert load_protocol(protocol).texts["back_to_study"] not in body  # never took part


def test_a_browser_that_took_part_is_offered_the_way_back(tmp_path, teammates, clock):
    browser = study_app(tmp_path, teammates, clock, GERMAN).test_client()
    assert browser.get("/p/zurueck-1").status_code == 200  # remembers the code
    body = browser.get("/p/zurueck-1/typo").get_data(as_text=True)
    assert re.search(r'href="/start">Zurück zur Studie</a>', body), body


@pytest.mark.parametrize("protocol", [GERMAN, DEMO], ids=["de", "en"])
def test_a_failure_of_the_server_gets_the_studys_500_without_its_details(
        tmp_path, teammates, clock, protocol, monkeypatch):
    app = study_app(tmp_path, teammates, clock, protocol)

    def fails(*_: object, **__: object) -> None:
        raise RuntimeError("secret detail of the failure")

    monkeypatch.setattr(app.extensions["study"], "enrol", fails)
    reply = app.test_client().get("/p/kaputt-1")
    assert reply.status_code == 500
    body = reply.get_data(as_text=True)
    in_the_study(body, protocol, "error_title", "error_text")
    assert "secret detail" not in body and "Traceback" not in body
    assert "Internal Server Error" not in body


@pytest.mark.parametrize("fault", [ServiceUnavailable(), StorageUnavailable("disk full")],
                         ids=["http-503", "storage"])
@pytest.mark.parametrize("protocol", [GERMAN, DEMO], ids=["de", "en"])
def test_a_moment_the_server_cannot_serve_gets_the_studys_503(
        tmp_path, teammates, clock, protocol, fault, monkeypatch):
    app = study_app(tmp_path, teammates, clock, protocol)

    def unavailable(*_: object, **__: object) -> None:
        raise fault

    monkeypatch.setattr(app.extensions["study"], "enrol", unavailable)
    reply = app.test_client().get("/p/warte-1")
    assert reply.status_code == 503 and int(reply.headers["Retry-After"]) > 0
    body = reply.get_data(as_text=True)
    in_the_study(body, protocol, "storage_wait_title", "storage_wait")
    assert "Service Unavailable" not in body


def test_the_consoles_errors_stay_plain_english(tmp_path, teammates, clock, monkeypatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)  # the console in demo mode
    reply = study_app(tmp_path, teammates, clock, GERMAN).test_client().get(
        "/console/no-such-page")
    assert reply.status_code == 404
    body = reply.get_data(as_text=True)
    assert "Not Found" in body and "Diese Seite gibt es nicht" not in body


@pytest.mark.browser
@pytest.mark.slow
def test_the_german_404_in_chromium_on_a_desktop_and_a_phone(tmp_path, teammates):
    """``study serve`` of the German demo: the page is styled by the study's stylesheet
    and fits the screen; on the phone, a participant who mistyped an address after
    taking part follows "Zurück zur Studie" back to their own page."""
    app = make_app(tmp_path, teammates, lambda: 0.0, protocol=GERMAN)
    shots = screenshot_directory(tmp_path)
    with LiveServer(app) as server, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name, viewport in (("desktop", {"width": 1280, "height": 800}),
                                   ("phone", PHONE)):
                page = chromium.new_page(viewport=viewport, device_scale_factor=2,
                                         has_touch=name == "phone")
                if name == "phone":
                    page.goto(f"{server.url}/p/handy-1")
                    page.wait_for_selector('[data-step="consent"]')
                response = page.goto(f"{server.url}/keine/seite")
                assert response is not None and response.status == 404
                heading = page.locator("main .card h2")
                assert heading.inner_text() == "Diese Seite gibt es nicht"
                assert page.evaluate("document.documentElement.lang") == "de"
                # bakery.css styles the card and the sign (not the browser's defaults)
                frame = frame_styles(page)
                assert frame["heading"].startswith("Georgia")
                assert frame["sign"] != "rgba(0, 0, 0, 0)"
                assert_fits(page, f"404 on a {name}")
                page.screenshot(path=str(shots / f"error-404-de-{name}.png"), full_page=True)
                back = page.get_by_role("link", name="Zurück zur Studie")
                assert back.count() == (1 if name == "phone" else 0)
                if name == "phone":
                    back.tap()
                    page.wait_for_url(f"{server.url}/p/handy-1")
                    page.wait_for_selector('[data-step="consent"]')
                page.close()
        finally:
            chromium.close()
