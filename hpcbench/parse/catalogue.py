"""The shapes of the log lines hpcbench reads, from NVIDIA's sources (NCCL, nccl-tests), ROCm's (RCCL,
rccl-tests) and the network plugins' (aws-ofi-nccl, nccl-rdma-sharp-plugins): catalogue.json.

One entry per shape: ``id``, ``tool`` (nccl, nccl-tests, rccl-tests), ``fact``, ``format`` (the format
string as written in the source, C escapes kept; a string-literal concatenation where the source has
one), ``since``/``until`` (first and last release holding it; until null: still in the newest examined),
``source`` (repository@release:file:line), ``feeds`` (the parsed fields it gives; [] for a shape that
carries no fact hpcbench reports), ``printed_as`` (INFO or WARN: after the NCCL prefix of its release;
prefix; alone; name: a network plugin's name, printed by "Using network %s"), ``args`` (the values a
test fills the format with), ``lines`` (when the line holds more than the shape: pieces in order, "$self"
the shape, {"id": ..} another shape), ``expect`` (what the parser reads from those lines), ``example``
and ``notes``. tests/test_logs_catalogue.py prints every shape and checks ``expect``.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.lru_cache(maxsize=1)
def shapes() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(resources.files("hpcbench.parse").joinpath("catalogue.json").read_text()))
