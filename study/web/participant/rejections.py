"""A refused message: the reason code the client sees and the detail the log keeps."""

from __future__ import annotations


class Rejected(Exception):
    """Raised inside an event; the event's transaction rolls back and the refusal is logged.
    Reason codes are listed in ``docs/socket-protocol.md``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail or reason
        super().__init__(f"{reason}: {self.detail}")
