"""Which websockets are compressed: the console's, not a participant page's.

Browsers ask every websocket for permessage-deflate, and the websocket server grants it.
A participant page's messages are a few hundred bytes, which deflate barely shrinks, yet
each connection then keeps a compressor and a decompressor for its lifetime (about 300 kB:
300 MB a worker at a thousand people) and every frame in and out passes through them
(``benchmarks/websocket_compression.py``). A page's Socket.IO connection names its route
(``ROUTE_PARAMETER``, the balancer's key); for those the request's offer is taken away
before the handshake, so the server grants nothing and the page sends and receives plain
frames. The console's connection names no route and keeps compression: its snapshots are
hundreds of kilobytes of JSON, sent to an experimenter who may be far away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

# The URL parameter that names a participant page's Socket.IO route; the balancer hashes
# it to a worker (``deploy.haproxy_config``).
ROUTE_PARAMETER = "route"
OFFER = "HTTP_SEC_WEBSOCKET_EXTENSIONS"  # the handshake's Sec-WebSocket-Extensions

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def is_participant_socket(environ: dict[str, Any]) -> bool:
    return ROUTE_PARAMETER in parse_qs(environ.get("QUERY_STRING", ""))


class PlainParticipantSockets:
    """WSGI middleware: a participant page's websocket handshake offers no extension."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if OFFER in environ and is_participant_socket(environ):
            del environ[OFFER]
        return self.app(environ, start_response)


def init_app(app: Any) -> None:
    """Wrap the app outside Socket.IO's own middleware, which answers the handshake."""
    app.wsgi_app = PlainParticipantSockets(app.wsgi_app)
