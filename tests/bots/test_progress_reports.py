"""The bots report a cookie in progress as the page does (``static/js/rounds.js``)."""

from __future__ import annotations

from study.bots.progress_reports import ProgressReports


def test_practice_reports_every_element_at_once():
    reports = ProgressReports.of({"progress_seconds": 0.0, "deadline": 30.0})
    assert all(reports.offer(at, [cell]) for cell, at in enumerate((0.1, 0.2, 0.25, 0.3)))
    assert reports.due() is None


def test_a_played_round_reports_at_most_once_an_interval_the_latest_cookie_at_its_end():
    reports = ProgressReports.of({"progress_seconds": 1.0, "deadline": 30.0})
    assert reports.offer(5.0, [1])
    assert not reports.offer(5.3, [1, 2]) and not reports.offer(5.6, [1, 2, 3])
    assert reports.due() == 6.0 and reports.take() == [1, 2, 3]
    assert reports.due() is None
    assert not reports.offer(6.4, [1, 2, 3, 4]), "within a second of the report at 6.0"
    assert reports.due() == 7.0
    reports.drop()  # the cookie was finished: its own message says it all
    assert reports.due() is None
    assert reports.offer(8.5, [9]), "a second after the last report goes at once"


def test_in_the_last_interval_every_element_goes_at_once_so_none_falls_after_the_deadline():
    reports = ProgressReports.of({"progress_seconds": 1.0, "deadline": 30.0})
    assert reports.offer(28.7, "GO")
    assert not reports.offer(28.8, "GOR") and reports.due() == 29.7
    assert reports.offer(29.1, "GORA") and reports.due() is None
    assert reports.offer(29.5, "GORAV")


def test_an_empty_cookie_is_a_report_too():
    reports = ProgressReports.of({"progress_seconds": 1.0, "deadline": 30.0})
    assert reports.offer(1.0, "G")
    assert not reports.offer(1.5, "") and reports.due() == 2.0 and reports.take() == ""
