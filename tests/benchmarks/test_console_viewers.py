"""The load run's console viewers (``benchmarks.console``): what their line says."""

from __future__ import annotations

from benchmarks.console import ConsoleViewers


def test_the_line_counts_the_windows_pushes_and_their_size():
    viewers = ConsoleViewers("http://127.0.0.1:1", 2, start=100.0, end=160.0)
    viewers.sizes = [3_000_000, 3_400_000]
    assert viewers.summary() == (", console views open 2: 2 live pushes in the window, "
                                 "3,200 kB each")


def test_no_views_no_line_and_no_pushes_no_size():
    assert ConsoleViewers("http://127.0.0.1:1", 0, 0.0, 1.0).summary() == ""
    assert ConsoleViewers("http://127.0.0.1:1", 1, 0.0, 1.0).summary() == (
        ", console views open 1: 0 live pushes in the window")
