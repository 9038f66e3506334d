"""The worker's garbage-collector schedule: old objects are frozen out of the collector's
sight, and every full-collection period they come back and cyclic garbage is freed."""

from __future__ import annotations

import gc
import weakref

import pytest

from study.web.serving.collector import ShortCollections


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cyclic_garbage() -> weakref.ref:
    """Two objects that refer to each other and to nothing else: only the collector frees
    them."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


@pytest.fixture(autouse=True)
def unfrozen():
    yield
    gc.unfreeze()


def test_a_step_freezes_what_lived_until_then():
    schedule = ShortCollections(freeze_seconds=10, full_collection_seconds=600)
    gc.unfreeze()
    keep = [Node() for _ in range(1000)]
    schedule.step()
    assert gc.get_freeze_count() >= len(keep)


def test_frozen_cyclic_garbage_is_freed_at_the_full_collection():
    schedule = ShortCollections(freeze_seconds=10, full_collection_seconds=30)
    gc.unfreeze()
    garbage = cyclic_garbage()
    schedule.step()  # 10 s: frozen with everything else
    gc.collect()
    assert garbage() is not None, "frozen objects are out of the collector's sight"
    schedule.step()  # 20 s
    assert garbage() is not None
    schedule.step()  # 30 s: the full collection
    assert garbage() is None
    assert gc.get_freeze_count() > 0, "frozen again after the full collection"
