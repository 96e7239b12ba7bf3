"""hpcbench: plan, run and explain distributed deep-learning scaling studies on Slurm."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load"]


def __getattr__(name: str) -> Any:
    # The API imports pandas; `import hpcbench` (the CLI, planning on a login node) must not.
    if name in ("load",):
        from hpcbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'hpcbench' has no attribute {name!r}")
