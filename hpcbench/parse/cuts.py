"""NCCL transport lines cut before or inside their transport, as a paste cut at a terminal's width or a truncated
log leaves them: parse reads no edge from one (nccl.py), check says it could not read it (outcome.py)."""

from __future__ import annotations

import functools
import re

# The start of a transport line, up to the ranks, and whatever follows them: a line cut before or inside its
# transport (a paste cut at a terminal's width, a truncated log) is told apart by what follows (edge_cut)
EDGE_START = r"(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[[^\]]*\])? -> (\d+)(?:\[[^\]]*\])?( [^\n]*)?$"
_VIA_TAILS = (" [send] via ", " [receive] via ", " via ")
# What NCCL prints in a transport (net.cc, p2p.cc, shm.cc: NET/<name>/<dev>/GDRDMA/Shared, P2P/IPC/read, ...):
# a last part that is only the start of one of these words was cut
_WORDS = ("GDRDMA", "Shared", "read", "IPC", "CUMEM", "direct", "indirect", "pointer", "Socket", "IB")
_HEADS = ("NET/", "P2P/", "SHM/", "NVLS", "COLLNET")


def edge_cut(tail: str | None) -> bool:
    """Whether what follows a transport line's ranks is cut before or inside its transport: nothing, a start of
    ' [send] via ', or a transport whose last part is a start of a word NCCL prints there."""
    t = tail or ""
    if not t.strip() or any(v.startswith(t) for v in _VIA_TAILS):
        return True
    via = t.find("via ")
    if via < 0:
        return False  # not a transport line ('Ring 00 : 1 -> 0 -> 1' is the ring's order)
    return cut_transport(t[via + 4:])


@functools.lru_cache(maxsize=4096)  # per edge line, ~2.5 us: a job prints a few transports 16,000 times
def cut_transport(raw: str) -> bool:
    """A transport cut short ('NET/IB/0/GDR', 'P2P/IP', 'NET/'): its edge is not read, since what was cut off
    (GDRDMA, /read) would change the conclusions."""
    t = raw.strip()
    if not t or t.endswith("/") or any(h.startswith(t) and h != t for h in _HEADS):
        return True
    last = re.split(r"[/ ]", t)[-1]
    return bool(last) and any(w.startswith(last) and w != last for w in _WORDS)
