"""``python -m hpcbench.sweep FILE [options]``: the same command as ``hpcbench sweep FILE``."""

from __future__ import annotations

import sys

from hpcbench.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["sweep", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
