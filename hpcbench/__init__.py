"""hpcbench: plan, run and explain distributed deep-learning scaling studies on Slurm."""

import sys
import types
from typing import Any

__version__ = "0.1.0"
# The Python API (hpcbench/api.py): load, load_logs and explain, each the code of a CLI verb.
API = ("load", "load_logs", "explain", "Explanation")
__all__ = ["Explanation", "__version__", "explain", "load", "load_logs"]


def __getattr__(name: str) -> Any:
    # The API imports pandas when it is called; `import hpcbench` (the CLI, planning on a login node) imports nothing.
    if name in API:
        from hpcbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'hpcbench' has no attribute {name!r}")


class _Package(types.ModuleType):
    """``hpcbench.explain`` is the API's function, though hpcbench/explain/ is a subpackage too: the import system
    sets a package's attribute to each subpackage it imports, and this leaves an API name to the API. The
    subpackage is still ``from hpcbench.explain import ...`` (the import system finds it in sys.modules)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
