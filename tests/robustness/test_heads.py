"""Request heads bounded at the protocol, on a keyed openjev over the fake SGLang, measured from outside.

Three connections each start a head of up to 10M header lines (80 MB): each gets its 431 from the
first 64 KiB, before the key is checked, while `/health/live` stays fast and the server's memory
flat (it once grew from 300 MB to 3.2 GB and stalled `/health` for about 15 s).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.robustness.conftest import address, liveness_under, p99, rss_mib

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(300)]

LINES = 10_000_000
LINE = b"X-Filler: 1234\r\n"
#: Header lines sent per write.
BLOCK = 65_536
RSS_GROWTH_MIB = 50
LIVENESS_P99 = 0.05


def endless_head(server_address: tuple[str, int], answers: list[bytes], sent: list[int]) -> None:
    """Send a head of `LINES` header lines (or until the server closes) while reading what it answers."""
    with socket.create_connection(server_address, timeout=30) as sock:
        received = bytearray()

        def read() -> None:
            try:
                while chunk := sock.recv(65536):
                    received.extend(chunk)
            except OSError:
                pass

        reader = threading.Thread(target=read)
        reader.start()
        count = 0
        try:
            sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\n")
            while count < LINES:
                sock.sendall(LINE * BLOCK)
                count += BLOCK
        except OSError:
            pass
        reader.join(30)
        answers.append(bytes(received))
        sent.append(count)


def test_ten_million_header_lines_get_a_431_at_the_head(keyed, tmp_path, figures) -> None:
    server, _ = keyed
    before = rss_mib(server.process.pid)
    answers: list[bytes] = []
    sent: list[int] = []
    peak = [before]

    def senders() -> None:
        threads = [threading.Thread(target=endless_head, args=(address(server), answers, sent)) for _ in range(3)]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            peak.append(rss_mib(server.process.pid))
            time.sleep(0.05)

    running = threading.Thread(target=senders)
    running.start()
    latencies, _ = liveness_under(server.url, {}, tmp_path, seconds=4.0)
    running.join(120)
    growth = max(peak) - before
    figures(rss_before_mib=before, rss_growth_mib=growth, health_live_p99_s=p99(latencies), lines_sent=sent)
    assert len(answers) == 3 and all(answer.startswith(b"HTTP/1.1 431 ") for answer in answers), answers
    assert growth < RSS_GROWTH_MIB and p99(latencies) < LIVENESS_P99
