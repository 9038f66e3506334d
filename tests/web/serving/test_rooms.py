"""Each connection's rooms kept by connection (``study.web.serving.rooms``)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import socketio

from study.web.serving.rooms import LocalManager

NAMESPACE = "/"


def table(manager: Any) -> dict[Any, dict[Any, str]]:
    """The library's rooms of a namespace as plain dicts: room -> {sid: eio_sid}."""
    return {room: dict(members) for room, members in manager.rooms.get(NAMESPACE, {}).items()}


def connect(manager: Any, sid: str) -> None:
    """What ``pre_connect`` does, with a sid of our choosing."""
    manager.basic_enter_room(sid, NAMESPACE, None, eio_sid=f"eio-{sid}")
    manager.basic_enter_room(sid, NAMESPACE, sid, eio_sid=f"eio-{sid}")
    manager.pending_connect.setdefault(NAMESPACE, []).append(sid)


def play(manager: Any, seed: int) -> None:
    """Connections come and go, enter and leave rooms by code and by team, in an order a
    seed picks; the same seed plays the same history on any manager."""
    rng = random.Random(seed)
    connected: list[str] = []
    for step in range(400):
        action = rng.random()
        if action < 0.3 or not connected:
            sid = f"s{step}"
            connect(manager, sid)
            connected.append(sid)
        elif action < 0.6:
            manager.basic_enter_room(rng.choice(connected), NAMESPACE,
                                     rng.choice(["code-a", "code-b", "team-1", "team-2"]))
        elif action < 0.75:
            manager.basic_leave_room(rng.choice(connected), NAMESPACE,
                                     rng.choice(["code-a", "team-1"]))
        elif action < 0.8:
            manager.basic_close_room(rng.choice(["code-b", "team-2"]), NAMESPACE)
        else:
            sid = connected.pop(rng.randrange(len(connected)))
            manager.callbacks[sid] = {1: print}
            manager.disconnect(sid, NAMESPACE)


@pytest.mark.parametrize("seed", range(5))
def test_the_rooms_are_python_socketios_after_any_history(seed):
    ours, theirs = LocalManager(), socketio.Manager()
    play(ours, seed)
    play(theirs, seed)
    assert table(ours) == table(theirs)
    assert ours.callbacks.keys() == theirs.callbacks.keys()
    assert ours.pending_connect == theirs.pending_connect
    for sid in table(theirs).get(None, {}):
        assert sorted(ours.get_rooms(sid, NAMESPACE)) == sorted(theirs.get_rooms(sid, NAMESPACE))


class Unwalkable(dict):
    """A namespace's rooms that refuse to be copied or walked whole."""

    def copy(self) -> dict:
        raise AssertionError("the whole table of rooms was copied")

    def items(self) -> Any:
        raise AssertionError("every room was looked in")


def test_a_disconnect_leaves_its_own_rooms_without_looking_in_the_others():
    manager = LocalManager()
    for number in range(50):
        connect(manager, f"s{number}")
        manager.basic_enter_room(f"s{number}", NAMESPACE, f"code-{number}")
    manager.rooms[NAMESPACE] = Unwalkable(manager.rooms[NAMESPACE])
    manager.disconnect("s7", NAMESPACE)
    assert "code-7" not in manager.rooms[NAMESPACE] and "s7" not in manager.rooms[NAMESPACE]
    assert "s7" not in manager.rooms[NAMESPACE][None]
    assert manager.get_rooms("s8", NAMESPACE) in (["s8", "code-8"], ["code-8", "s8"])
