"""The websocket compression benchmark measures what it says
(``benchmarks.websocket_compression``)."""

from __future__ import annotations

from wsproto.events import TextMessage

from benchmarks import websocket_compression as bench


def test_the_browser_reads_the_three_answers_either_way():
    for deflate in (False, True):
        browser, server = bench.connected(deflate)
        browser.receive_data(bench.exchange(server, browser.send(TextMessage(data=bench.PLACED))))
        texts = [event.data for event in browser.events() if isinstance(event, TextMessage)]
        assert texts == [bench.ACK, bench.STATION, bench.STATION]


def test_deflate_is_granted_only_when_offered():
    for deflate in (False, True):
        browser, server = bench.connected(deflate)
        answers = bench.exchange(server, browser.send(TextMessage(data=bench.PLACED)))
        rsv1 = bool(answers[0] & 0x40)  # a compressed frame's first byte says so
        assert rsv1 is deflate


def test_a_deflating_connection_holds_its_compressors():
    plain = bench.memory_a_connection(False, 5)
    deflated = bench.memory_a_connection(True, 5)
    assert deflated > plain + 100_000  # a compressor's window and hash table at least


def test_the_report_gives_both_ways_and_the_ratio(capsys):
    bench.main(["--messages", "50", "--connections", "3", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "| plain |" in out and "| permessage-deflate |" in out
    assert "permessage-deflate over plain: CPU" in out
