"""What permessage-deflate costs a participant page's websocket, as ratios from one run.

    python -m benchmarks.websocket_compression [--messages 20000] [--connections 200]

The server's side of the websocket protocol (wsproto, which the websocket server runs)
takes a teams3 message's frames with and without the extension every browser asks for:
a placed element in, its acknowledgement and the station pushed to two teammates out.
It gives the CPU a message each way (the least of ``--repeats`` runs, alternating) and
the memory one connection keeps for the extension once a message has passed each way:
the compressor and decompressor it holds for its lifetime. ``study.web.serving.websockets``
grants a participant page's socket no extension; the console keeps it.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

PLACED = '42["progress",' + json.dumps({"msg_id": "m8Zq2LrT0c4X", "round": 7, "cookie": 3,
                                        "content": {"cells": [[1, 0, 1], [0, 1, 0],
                                                              [1, 1, 0]]}}) + "]"
ACK = "430" + json.dumps([{"ok": True}])
STATION = '42["station",' + json.dumps({"team_round": 1312, "seat": 2, "cookies": 3,
                                         "placed": 5, "elements": 9}) + "]"


def connected(deflate: bool) -> tuple[WSConnection, WSConnection]:
    """A browser's side and the server's, past the handshake; the browser asks for
    permessage-deflate and the server grants it, or the browser's offer was taken away."""
    browser, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    offer = [PerMessageDeflate()] if deflate else []
    server.receive_data(browser.send(Request(host="study", target="/socket.io/",
                                             extensions=offer)))
    list(server.events())
    browser.receive_data(server.send(AcceptConnection(extensions=[PerMessageDeflate()])))
    list(browser.events())
    return browser, server


def exchange(server: WSConnection, frame: bytes) -> bytes:
    """The server takes one message's frame and sends its three answers."""
    server.receive_data(frame)
    list(server.events())
    return b"".join(server.send(TextMessage(data=text)) for text in (ACK, STATION, STATION))


def cpu_a_message(deflate: bool, messages: int) -> float:
    """Microseconds of CPU the server's side takes for a message (framing included)."""
    browser, server = connected(deflate)
    frames = [browser.send(TextMessage(data=PLACED)) for _ in range(messages)]
    started = time.process_time()
    for frame in frames:
        exchange(server, frame)
    return (time.process_time() - started) / messages * 1e6


def memory_a_connection(deflate: bool, connections: int) -> float:
    """Bytes each server side holds after one message each way (tracemalloc sees the
    compressor's and decompressor's buffers)."""
    pairs = [connected(deflate) for _ in range(connections)]
    frames = [browser.send(TextMessage(data=PLACED)) for browser, _ in pairs]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for (_, server), frame in zip(pairs, frames, strict=True):
            exchange(server, frame)
        return (tracemalloc.get_traced_memory()[0] - before) / connections
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for deflate in (False, True):
            cpu[deflate].append(cpu_a_message(deflate, args.messages))
    plain, deflated = min(cpu[False]), min(cpu[True])
    memory = {deflate: memory_a_connection(deflate, args.connections) for deflate in cpu}
    print("| websocket | server CPU µs a message (in, three out) | memory a connection kB |")
    print("|---|---|---|")
    print(f"| plain | {plain:.1f} | {memory[False] / 1000:.1f} |")
    print(f"| permessage-deflate | {deflated:.1f} | {memory[True] / 1000:.1f} |")
    extra_kb = (memory[True] - memory[False]) / 1000
    print(f"\npermessage-deflate over plain: CPU {deflated / plain:.2f} times "
          f"({deflated - plain:.1f} µs a message more); {extra_kb:.0f} kB more a connection, "
          f"{extra_kb:.0f} MB a thousand connections")


if __name__ == "__main__":
    main()
