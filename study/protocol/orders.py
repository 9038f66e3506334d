"""The orders of conditions a counterbalanced study rotates through.

Each participant (or real team) is given the order fewest hold (``study.web.console.balance``),
so the orders listed here end up equally often. With two or three conditions that is every
order: 2 or 6 of them. Four conditions have 24 orders, too many to fill evenly in a study of a
few dozen people; a balanced Latin square (Williams, 1949) of four rows does the work instead:
each condition comes once at each position and right after every other condition exactly
once, so the sessions' position and the condition just before are balanced too.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

# Up to this many conditions a study rotates through every order.
EVERY_ORDER_UP_TO = 3


def counterbalanced(condition_ids: Sequence[str], mode: str) -> list[list[str]]:
    """The orders in rotation, the listed order first: every order up to three conditions,
    a Williams square's rows for four; ``fixed`` keeps the listed order only."""
    listed = list(condition_ids)
    if mode == "fixed":
        return [listed]
    if len(listed) <= EVERY_ORDER_UP_TO:
        return [list(order) for order in permutations(listed)]
    return [[listed[k] for k in row] for row in williams_square(len(listed))]


def williams_square(n: int) -> list[list[int]]:
    """A balanced Latin square of ``n`` (even) conditions, first row ``0, 1, ..., n-1``.

    Williams' construction: the row ``0, 1, n-1, 2, n-2, ...`` and its cyclic shifts, each
    position seeing every condition once and every ordered pair of different conditions
    adjacent once; relabelled so that the first row is the listed order (a relabelling keeps
    both properties)."""
    if n < 2 or n % 2:
        raise ValueError(f"a Williams square of one row per condition needs an even number "
                         f"of conditions, not {n}")
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    label = {value: position for position, value in enumerate(first)}
    return [[label[(value + shift) % n] for value in first] for shift in range(n)]


def describe(orders: Sequence[Sequence[str]], mode: str) -> str:
    """The rotation in words, for ``study check``."""
    if mode == "fixed":
        return "always in the listed order"
    count = len(orders[0])
    if count <= EVERY_ORDER_UP_TO:
        return "counterbalanced over " + ("both orders" if count == 2 else
                                          f"all {len(orders)} orders")
    return (f"counterbalanced over the {len(orders)} orders of a balanced Latin square "
            "(each robot once at each position and once right after each other)")
