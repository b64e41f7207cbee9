"""The server's HTTP connections: uvicorn's protocol with Nagle's algorithm off on every connection.

asyncio turns ``TCP_NODELAY`` on for the connections of a listening socket it made itself
(``loop.create_server(host, port)``: one uvicorn worker), but not for those of a socket made
elsewhere with protocol number 0, which is what uvicorn hands its workers when ``--workers`` is
over 1 (``asyncio.base_events._set_nodelay`` checks ``sock.proto == IPPROTO_TCP``). uvicorn then
writes a response as two segments (headers, body); Nagle holds the body until the client
acknowledges the headers, and the client delays that acknowledgement (Linux: 40 ms) while it
waits for the body (Nagle 1984; RFC 1122 sec. 4.2.3.2). Every request of a two-worker server
took about 48 ms whatever the load. :class:`NoDelayHTTPProtocol` sets ``TCP_NODELAY`` on each
connection it is given, whoever made the listening socket.
"""

from __future__ import annotations

import socket

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["NoDelayHTTPProtocol"]


class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol (httptools where installed, else h11) with ``TCP_NODELAY`` on its connection."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # a connection already closed by the peer: nothing to tune
                pass
        super().connection_made(transport)
