"""What a hostile or careless client cannot do to `qtsearch serve` (qtsearch.app.serve.guards and
limits): amplifying requests are refused with 413 and the limit, the token is checked before a
body is read, requests beyond the concurrency bound get 503 + Retry-After, slow or idle
connections are closed, foreign Host names are refused, HEAD works wherever GET does.

Each test runs a real uvicorn server (serve_fixtures.serving, with the same protocol and
timeouts as `qtsearch serve`) over the session's real flat index, and talks to it with httpx
or, where a client must misbehave (trickle bytes, stop mid-body), a raw socket.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlparse

import httpx
import pytest
from serve_fixtures import serving, token_file


def _raw(url: str) -> socket.socket:
    u = urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=30)
    return sock


def _read_all(sock: socket.socket, limit: float = 30) -> bytes:
    """Everything until the server closes the connection (or `limit` seconds)."""
    sock.settimeout(limit)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data


def _closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closed `sock` (recv returns b''); fails past `seconds`."""
    t0 = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        pytest.fail(f"the connection was still open after {seconds} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - t0


def test_queries_times_k_is_capped_with_413(flat):
    with serving(flat) as url, httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/search", json={"q": ["Emma was happy."] * 100, "k": 1000})
        assert r.status_code == 413
        assert r.json()["error"] == ("100 queries × k 1000 = 100,000 results in one request: "
                                     "at most 10,000")
        assert c.post("/search", json={"q": ["Emma was happy."] * 10, "k": 1000}
                      ).status_code == 200


def test_answer_size_is_capped_with_413(flat):
    with serving(flat, max_response_bytes=4096) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        r = c.get("/search", params={"q": "Emma was happy.", "k": 100})
        assert r.status_code == 413
        assert "at most 4,096 (ask for fewer queries or a smaller k)" in r.json()["error"]
        assert c.get("/search", params={"q": "Emma was happy.", "k": 2}).status_code == 200


def test_add_token_is_checked_before_the_body_is_read(flat, tmp_path):
    """A 16 MB /add announced without a token is refused on its headers alone: the answer
    comes while not one byte of the body has been sent."""
    with serving(flat, token_file(tmp_path)) as url:
        for auth, status in ((b"", 401), (b"Authorization: Bearer wrong-token\r\n", 403)):
            sock = _raw(url)
            sock.sendall(b"POST /add HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: 16000000\r\n\r\n")
            t0 = time.monotonic()
            answer = _read_all(sock, 10)
            assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
            assert time.monotonic() - t0 < 5
            sock.close()


def test_requests_beyond_the_concurrency_bound_get_503_with_retry_after(flat):
    """Two requests hold the server's two places (their bodies never finish); the third is
    answered 503 with Retry-After at once; /health still answers; once they end, all is
    served again."""
    with serving(flat, max_concurrent=2, body_timeout=3) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        held = []
        for _ in range(2):
            sock = _raw(url)
            sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            held.append(sock)
        time.sleep(0.5)
        r = c.get("/search", params={"q": "Emma was happy."})
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"] == "server busy: 2 requests in progress (at most 2); retry in 1 s"
        assert c.get("/health").status_code == 200
        for sock in held:  # the bodies never come: 408 after body_timeout
            assert _read_all(sock, 10).startswith(b"HTTP/1.1 408 ")
            sock.close()
        assert c.get("/search", params={"q": "Emma was happy."}).status_code == 200


def test_idle_and_slow_connections_are_closed(flat):
    with serving(flat, header_timeout=1, body_timeout=1, keep_alive_timeout=1) as url:
        idle = _raw(url)  # connects and says nothing
        assert _closed_within(idle, 10) < 5
        slow = _raw(url)  # headers at one byte a second

        def trickle() -> None:
            for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n":
                try:
                    slow.send(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.5)

        threading.Thread(target=trickle, daemon=True).start()
        assert _closed_within(slow, 10) < 5
        body = _raw(url)  # a body that stops half-way
        body.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"q\":")
        answer = _read_all(body, 10)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"within 1 s" in answer
        kept = _raw(url)  # a kept-alive connection left idle after its answer
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        t0 = time.monotonic()
        assert b"200 OK" in _read_all(kept, 10)  # read until the server closes it
        assert time.monotonic() - t0 < 5
        for sock in (idle, slow, body, kept):
            sock.close()


def test_foreign_host_names_are_refused(flat):
    with serving(flat) as url, httpx.Client(base_url=url, timeout=60) as c:
        port = urlparse(url).port
        r = c.get("/info", headers={"Host": f"attacker.example:{port}"})
        assert r.status_code == 400
        assert r.json()["error"].startswith("Host 'attacker.example' is not served here")
        assert "--allow-host attacker.example" in r.json()["error"]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
    with serving(flat, allow_hosts=("search.example",)) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        assert c.get("/health", headers={"Host": "search.example"}).status_code == 200
        assert c.get("/health", headers={"Host": "other.example"}).status_code == 400


def test_two_host_headers_are_refused(flat):
    """A second Host ("evil.com" then "localhost") must not slip past the allow-list."""
    with serving(flat) as url:
        port = urlparse(url).port
        for hosts in ((b"evil.com", b"localhost"), (b"localhost", b"localhost")):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(b"GET /info HTTP/1.1\r\nHost: " + hosts[0] + b"\r\nHost: "
                             + hosts[1] + b"\r\nConnection: close\r\n\r\n")
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
            assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
            assert b"more than one Host header" in reply
        with httpx.Client(base_url=url, timeout=60) as c:
            assert c.get("/health").status_code == 200


def test_head_is_answered_wherever_get_is(flat):
    with serving(flat) as url, httpx.Client(base_url=url, timeout=60) as c:
        for path, params in (("/", {}), ("/health", {}), ("/info", {}),
                             ("/search", {"q": "Emma was happy.", "k": 3}),
                             ("/sentences/5", {"context": 1}), ("/docs", {}),
                             ("/static/app.js", {})):
            got = c.get(path, params=params)
            head = c.head(path, params=params)
            assert head.status_code == got.status_code == 200, (path, head.text)
            assert head.content == b""
            assert head.headers["content-length"] == got.headers["content-length"], path
        assert c.head("/no-such-page").status_code == 404
