"""The communication benchmark under its first name: job scripts rendered before the kind was renamed
``collective`` (queued during an upgrade, or kept in run directories) run ``python -m hpcbench.workloads.allreduce``."""

from __future__ import annotations

import sys

from hpcbench.workloads.collective import main

if __name__ == "__main__":
    sys.exit(main())
