"""Ports for child processes that bind them a moment later."""

from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a child process that binds it a moment later.

    Drawn below Linux's ephemeral range (32768-60999): a port the kernel handed out (bind to 0)
    can be handed out again, to an outgoing connection of the test itself, before the child
    binds it, and the child then fails with "address already in use".
    """
    while True:
        port = random.randrange(20000, 32000)  # noqa: S311 - a port, not a secret
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
