"""The embedded router's replies leave in one write: headers and body as two small writes on a
kept-alive connection meet Nagle's algorithm and the client's delayed ACK, ~40 ms on every call."""

from __future__ import annotations

import socket
import types
from typing import Any

from subagent_lab.local_models.llama_server import make_handler


class CountingSocket(socket.socket):
    """A socket that counts the writes made on it that carry bytes."""

    writes = 0

    def send(self, data: Any, *args: Any) -> int:
        CountingSocket.writes += bool(len(data))
        return super().send(data, *args)

    def sendall(self, data: Any, *args: Any) -> None:
        CountingSocket.writes += bool(len(data))
        super().sendall(data, *args)


def test_a_reply_is_one_write() -> None:
    ours, theirs = socket.socketpair()
    conn = CountingSocket(fileno=ours.detach())
    theirs.sendall(b"GET /v1/models HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n")
    router = make_handler(types.SimpleNamespace(ports={"light": 1, "main": 2}, default="light"))
    server = types.SimpleNamespace(server_name="router", server_port=0)
    router(conn, ("127.0.0.1", 0), server)  # type: ignore[arg-type]
    conn.close()
    reply = b""
    while chunk := theirs.recv(65536):
        reply += chunk
    theirs.close()
    assert reply.startswith(b"HTTP/1.1 200") and b'"light"' in reply and b'"main"' in reply
    assert CountingSocket.writes == 1
