"""A TCP relay between a client and a real PostgreSQL, to cause network faults at chosen moments:
``cut_after_login`` drops each connection as the server accepts the login (the password was
sent, then the server is gone); ``freeze()`` stops relaying the open connections without closing
them (a silent network partition: neither side hears from the other, nor of the end)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class Relay:
    def __init__(self, host: str, port: int, *, cut_after_login: bool = False) -> None:
        self.upstream = (host, port)
        self.cut_after_login = cut_after_login
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.cut = 0
        self._frozen: list[threading.Event] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        """The connections open now carry nothing more, either way, and stay open."""
        for frozen in self._frozen:
            frozen.set()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            frozen = threading.Event()
            self._frozen.append(frozen)
            threading.Thread(target=self._serve, args=(client, frozen), daemon=True).start()

    def _serve(self, client: socket.socket, frozen: threading.Event) -> None:
        with client, socket.create_connection(self.upstream) as upstream:
            threading.Thread(target=_pass, args=(client, upstream, frozen), daemon=True).start()
            if not self.cut_after_login:
                _pass(upstream, client, frozen)
                return
            # Plain TCP (sslmode=disable) only: the server's messages are read, type and length.
            reader = upstream.makefile("rb")
            while head := reader.read(5):
                body = reader.read(struct.unpack("!I", head[1:5])[0] - 4)
                if head[:1] == b"R" and body[:4] == b"\0\0\0\0":  # AuthenticationOk
                    self.cut += 1
                    # shutdown, not just close: that wakes the thread reading the client
                    client.shutdown(socket.SHUT_RDWR)
                    with contextlib.suppress(OSError):  # the woken thread may have shut it down first
                        upstream.shutdown(socket.SHUT_RDWR)
                    return
                client.sendall(head + body)


def _pass(source: socket.socket, target: socket.socket, frozen: threading.Event) -> None:
    try:
        while data := source.recv(65536):
            if not frozen.is_set():
                target.sendall(data)
        if not frozen.is_set():
            target.shutdown(socket.SHUT_WR)  # the end, passed on
    except OSError:
        pass  # the other direction closed both
