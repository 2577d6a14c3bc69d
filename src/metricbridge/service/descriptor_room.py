"""How many client connections fit under the process's open-file limit.

Every connection, open or waiting for a slot, is a file descriptor; past the soft limit
``accept`` fails and the listener spins on the error. The cap and the waiting room are
lowered to fit, once at start-up, with a warning.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("metricbridge.server")

# File descriptors kept free below the soft limit for upstream connections, the rules file and
# the interpreter's own; the connection cap is lowered to fit under the rest.
_RESERVED_DESCRIPTORS = 64


def waiting_room(cap: int) -> int:
    """How many connections may wait for a slot: ``cap``, or what the open-file limit leaves."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(0, min(cap, soft - _RESERVED_DESCRIPTORS - cap))


def fitted_cap(requested: int) -> int:
    """``requested``, lowered to fit under the process's open-file limit (with a warning)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    room = max(1, soft - _RESERVED_DESCRIPTORS)
    if requested > room:
        log.warning(
            "--web.max-connections %d does not fit the open-file limit %d: using %d",
            requested,
            soft,
            room,
        )
        return room
    return requested
