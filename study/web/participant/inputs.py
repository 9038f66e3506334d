"""Client input checked before it reaches SQLite or the JSON decoder's recursion limit.

SQLite stores integers of 64 bits: a larger number raises ``OverflowError`` at binding time,
so every number a message carries is range-checked first and refused as ``malformed``. The
Socket.IO packet decoder is given ``PacketJSON``: a payload nested deeper than Python's
recursion limit becomes ``TOO_DEEP`` (so the handler refuses it with an ack) instead of an
exception that drops the packet without a word.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from study.storage.database import to_json
from study.web.participant.rejections import Rejected

# Ids and counts a message may carry: positive and within SQLite's and JavaScript's exact
# integers (2**53), far above any round id or round number a study reaches.
LARGEST_ID = 2**53
EVENT_NAME = re.compile(r'\s*\[\s*"([A-Za-z_]{1,32})"')


class TooDeep(str):
    """The payload of a packet whose JSON nests too deep to decode."""


TOO_DEEP = TooDeep("nested too deep")


def whole(value: Any, name: str, low: int = 1, high: int = LARGEST_ID) -> int:
    """``value`` as a whole number in ``[low, high]``, else a ``malformed`` refusal."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise Rejected("malformed", f"{name} must be a whole number in [{low}, {high}]")
    return value


class PacketJSON:
    """The ``json`` module python-socketio encodes and decodes packets with: orjson, and the
    standard library for the text orjson refuses (``NaN``, lone surrogates, nesting past
    1,024 levels), so a packet is read as it always was and refused with an ack."""

    @staticmethod
    def dumps(value: Any, **kwargs: Any) -> str:
        return to_json(value)  # python-socketio asks for compact separators: the same

    @staticmethod
    def loads(text: str | bytes, **kwargs: Any) -> Any:
        if not kwargs:
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
        try:
            return json.loads(text, **kwargs)
        except RecursionError:
            head = text[:64].decode(errors="replace") if isinstance(text, bytes) else text[:64]
            match = EVENT_NAME.match(head)
            return [match.group(1) if match else "message", TOO_DEEP]
