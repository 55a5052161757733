"""Optional dependencies: import one, or say which ``nbviz[extra]`` installs it.

The core install stays lean; the integrations and importers need a library of
their own (transformers, lightning, tensorboard), installed with an extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs the {module!r} package, which is not installed: "
            f"pip install 'nbviz[{extra}]'"
        ) from exc
