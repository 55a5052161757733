"""Optional dependencies: import one, or say which ``nbviz[extra]`` installs it.

The core install stays lean; the integrations and importers need a library of
their own (transformers, lightning, tensorboard), installed with an extra.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the extra that installs it.

    The error names the package a user installs (``tensorboard``, not the
    submodule imported from it); a package that is there but lacks ``module``
    (another version) is said to be so.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.partition(".")[0]
        if not _installed(package):
            problem = f"needs the {package!r} package, which is not installed"
        else:
            problem = f"could not import {module!r} ({exc})"
        raise ImportError(f"{what} {problem}: pip install 'nbviz[{extra}]'") from exc


def _installed(package: str) -> bool:
    """Whether ``package`` can be found (``sys.modules[package] = None`` hides it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
