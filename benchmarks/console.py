"""Experimenters watching: the console's live view open during a load run (``benchmarks.load
--console N``), as a lab keeps it open through a study day. The server builds the view of
the people taking part and pushes it whenever it changed; what that costs the participants
is what a run with it open shows against one without."""

from __future__ import annotations

import threading
import time
from types import TracebackType

import socketio

NAMESPACE = "/console"


class ConsoleViewers:
    """``count`` live views of the console at ``url`` (a load run's server, in demo mode:
    no password), counting the snapshots pushed to them between ``start`` and ``end``."""

    def __init__(self, url: str, count: int, start: float, end: float) -> None:
        self.url = url
        self.count = count
        self.start, self.end = start, end
        self.sizes: list[int] = []  # bytes of each snapshot pushed in the window
        self.lock = threading.Lock()
        self.clients: list[socketio.Client] = []

    def __enter__(self) -> ConsoleViewers:
        for _ in range(self.count):
            client = socketio.Client(reconnection=True)
            client.on("live", self._pushed, namespace=NAMESPACE)
            client.connect(self.url, namespaces=[NAMESPACE], transports=["websocket"],
                           wait_timeout=30)
            self.clients.append(client)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for client in self.clients:
            client.disconnect()

    def _pushed(self, text: str, _now: float) -> None:
        """A snapshot pushed (as the page gets it: JSON text and the server's clock)."""
        if self.start <= time.time() <= self.end:
            with self.lock:
                self.sizes.append(len(text))

    def summary(self) -> str:
        """A line for the run's details."""
        if not self.count:
            return ""
        pushed = len(self.sizes)
        size = f", {sum(self.sizes) / pushed / 1e3:,.0f} kB each" if pushed else ""
        return (f", console views open {self.count}: {pushed} live pushes in the window"
                f"{size}")
