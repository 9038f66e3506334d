"""Every page links the cookie icon, and ``/favicon.ico`` answers with it, so browsers log
no missing favicon."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ICON = (ROOT / "static" / "favicon.svg").read_bytes()
LINK = '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">'


@pytest.mark.parametrize("path", ["/favicon.ico", "/static/favicon.svg"])
def test_the_icon_is_served(app, path):
    reply = app.test_client().get(path)
    assert reply.status_code == 200 and reply.mimetype == "image/svg+xml"
    assert reply.data == ICON and ICON.startswith(b"<svg")


@pytest.mark.parametrize("path", ["/", "/p/icon-page", "/console/", "/start?x=1"])
def test_pages_link_the_icon(app, path):
    reply = app.test_client().get(path, follow_redirects=True)
    assert reply.status_code == 200, path
    assert LINK in reply.get_data(as_text=True)
