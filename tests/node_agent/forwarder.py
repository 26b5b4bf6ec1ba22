"""A TCP relay from listening sockets inside another network namespace to one loopback address.

The local node gives its pods the API server at an address on its bridge, as kube-proxy gives a
real node's pods the `kubernetes` Service. The API server listens on the host's loopback, which
the pods' namespaces cannot reach, so the agent relays: its listening sockets are made by a
short-lived thread that joins the bridge's network namespace (a socket stays in the namespace it
was created in, whichever thread uses it later), and one relay thread, started in the host's
namespace, accepts there and connects to the loopback target. Bytes pass through untouched (TLS
included: clients check the API server's own certificate). Nothing but a loopback target is
accepted, and `close` ends the thread and closes every socket.
"""

from __future__ import annotations

import contextlib
import ipaddress
import selectors
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from tfcompile.compiler.local_run import linux

CHUNK = 65536
BACKLOG = 64
MAXIMUM_CONNECTIONS = 128
CONNECT_SECONDS = 5.0


class ForwarderError(OSError):
    """The relay could not be set up (the message says which step failed)."""


def loopback_target(host: str, port: int) -> tuple[str, int]:
    """(`host`, `port`) if `host` is a loopback address (or `localhost`); raises otherwise."""
    address = "127.0.0.1" if host == "localhost" else host
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ForwarderError(f"the relay only connects to loopback addresses, not {host!r}")
    return address, port


def listen_inside(namespace: int, addresses: Sequence[tuple[str, int]]) -> list[socket.socket]:
    """Listening TCP sockets on `addresses`, made inside the network namespace `namespace` (an
    open descriptor) by a thread of their own, which ends when they are made."""
    made: list[socket.socket] = []
    failures: list[OSError] = []

    def make() -> None:
        try:
            linux.setns(namespace, linux.CLONE_NEWNET)
            for host, port in addresses:
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                made.append(listener)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((host, port))
                listener.listen(BACKLOG)
        except OSError as error:
            failures.append(error)

    maker = threading.Thread(target=make, name="listening in the bridge namespace")
    maker.start()
    maker.join()
    if failures:
        for listener in made:
            listener.close()
        raise ForwarderError(f"cannot listen on {addresses}: {failures[0]}")
    return made


@dataclass(eq=False)
class _End:
    """One socket of a relayed connection and the bytes waiting to be written to it."""

    sock: socket.socket
    outgoing: bytearray = field(default_factory=bytearray)
    reading: bool = True  # its peer has not ended its stream yet
    registered: int = 0


@dataclass(eq=False)
class _Connection:
    client: _End
    upstream: _End

    def peer(self, end: _End) -> _End:
        return self.upstream if end is self.client else self.client

    def finished(self) -> bool:
        return not (self.client.reading or self.upstream.reading
                    or self.client.outgoing or self.upstream.outgoing)


class Forwarder:
    """Relays connections accepted on `listeners` to `target`, in one thread."""

    def __init__(self, listeners: list[socket.socket], target: tuple[str, int]) -> None:
        self.listeners = listeners
        self.target = target
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._connections: list[_Connection] = []
        self._selector = selectors.DefaultSelector()
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, namespace: int, addresses: Sequence[tuple[str, int]],
             target: tuple[str, int]) -> Forwarder:
        """Listen on `addresses` inside `namespace`, relaying to the loopback `target`."""
        loopback_target(*target)
        return cls(listen_inside(namespace, addresses), target)

    @property
    def connections(self) -> int:
        return len(self._connections)

    def start(self) -> None:
        """Start relaying (call from a thread in the namespace the target is reached from)."""
        for listener in self.listeners:
            listener.setblocking(False)
            self._selector.register(listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="API server relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the relay thread and close every socket (listeners and connections)."""
        if self._thread is not None:
            with contextlib.suppress(OSError):
                self._wake_writer.send(b"x")
            self._thread.join()
            self._thread = None
        for connection in list(self._connections):
            self._drop(connection)
        for listener in self.listeners:
            listener.close()
        self.listeners = []
        self._selector.close()
        self._wake_reader.close()
        self._wake_writer.close()

    # The relay thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            for key, events in self._selector.select():
                if key.fileobj is self._wake_reader:
                    return
                if key.data is None:
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                    continue
                connection, end = key.data
                if connection in self._connections:
                    self._serve(connection, end, events)
            for connection in list(self._connections):
                self._update(connection)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if len(self._connections) >= MAXIMUM_CONNECTIONS:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=CONNECT_SECONDS)
            except OSError:
                client.close()
                continue
            client.setblocking(False)
            upstream.setblocking(False)
            self._connections.append(_Connection(_End(client), _End(upstream)))

    def _serve(self, connection: _Connection, end: _End, events: int) -> None:
        peer = connection.peer(end)
        try:
            if events & selectors.EVENT_WRITE and end.outgoing:
                sent = end.sock.send(end.outgoing)
                del end.outgoing[:sent]
                if not end.outgoing and not peer.reading:
                    end.sock.shutdown(socket.SHUT_WR)
            if events & selectors.EVENT_READ and end.reading:
                data = end.sock.recv(CHUNK)
                if data:
                    peer.outgoing += data
                else:
                    end.reading = False
                    if not peer.outgoing:
                        peer.sock.shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(connection)
            return
        if connection.finished():
            self._drop(connection)

    def _update(self, connection: _Connection) -> None:
        """Read from an end only when its peer has nothing left to write; write when it has."""
        for end in (connection.client, connection.upstream):
            peer = connection.peer(end)
            wanted = ((selectors.EVENT_READ if end.reading and not peer.outgoing else 0)
                      | (selectors.EVENT_WRITE if end.outgoing else 0))
            if wanted == end.registered:
                continue
            if end.registered == 0:
                self._selector.register(end.sock, wanted, (connection, end))
            elif wanted == 0:
                self._selector.unregister(end.sock)
            else:
                self._selector.modify(end.sock, wanted, (connection, end))
            end.registered = wanted

    def _drop(self, connection: _Connection) -> None:
        for end in (connection.client, connection.upstream):
            if end.registered:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(end.sock)
                end.registered = 0
            end.sock.close()
        if connection in self._connections:
            self._connections.remove(connection)
