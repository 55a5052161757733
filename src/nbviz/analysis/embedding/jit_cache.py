"""UMAP's compiled code kept across kernels: numba's cache in the user's cache folder.

umap-learn and pynndescent compile their numba functions on first use: about a
minute of a fresh kernel's first UMAP fit, paid again by every kernel. numba
can keep compiled code on disk, but only for functions marked ``cache=True``
and, in a site-packages install, only where it may write. So, before umap is
imported:

- ``NUMBA_CACHE_DIR`` is pointed at ``<user cache>/nbviz/numba`` (platformdirs'
  user cache folder, ``~/.cache`` on Linux), unless the user set it: their
  choice stands;
- while umap is imported (:func:`caching_numba`), ``numba.njit`` and
  ``numba.jit`` default to ``cache=True``, so the functions compiled at import
  (those with explicit signatures) are read back instead of compiled again;
- after the import, every numba function of umap and pynndescent still without
  a cache is given one (numba's own ``Dispatcher.enable_caching``), so its
  compiled code is written there on first use and read back by the next
  kernel. Functions numba cannot cache (closures over dynamic globals) are
  left as they are: numba skips them.

:func:`prepare` only sets the variable; :func:`caching_numba` imports numba.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "cache_compiled",
    "cache_dir",
    "cache_is_warm",
    "caching_numba",
    "first_fit_note",
    "prepare",
]

_PACKAGES = ("umap", "pynndescent")
# caching_numba's blocks may overlap (projectors fitting in their own threads): the
# first to enter patches numba, the last to leave puts numba's own functions back
_patch_lock = threading.Lock()
_patch_depth = 0
_numba_own: tuple[Any, Any] | None = None


def cache_dir() -> Path:
    """Where compiled code is kept: ``NUMBA_CACHE_DIR`` when the user set it, else
    ``<user cache folder>/nbviz/numba``."""
    own = os.environ.get("NUMBA_CACHE_DIR")
    if own:
        return Path(own)
    try:
        from platformdirs import user_cache_path

        base = user_cache_path("nbviz", appauthor=False)
    except ImportError:  # platformdirs is optional: the XDG rule
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nbviz"
    return base / "numba"


def prepare() -> Path:
    """Set ``NUMBA_CACHE_DIR`` for umap's compiled code (unless the user set it) and
    return the folder. Call before umap is imported; also right if numba already is."""
    path = cache_dir()
    if not os.environ.get("NUMBA_CACHE_DIR"):
        os.environ["NUMBA_CACHE_DIR"] = str(path)
        config = sys.modules.get("numba.core.config")
        if config is not None:  # numba read its settings already: tell it too
            config.CACHE_DIR = str(path)
    return path


def cache_is_warm(path: Path | None = None) -> bool:
    """Whether compiled umap code is kept in the cache folder (from an earlier kernel)."""
    root = path or cache_dir()
    try:
        return any(root.glob("umap*/**/*.nbi")) or any(root.glob("**/umap*.nbi"))
    except OSError:
        return False


def _cached(decorator: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(decorator)
    def with_cache(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cache", True)
        return decorator(*args, **kwargs)

    return with_cache


@contextlib.contextmanager
def caching_numba() -> Iterator[None]:
    """Inside the block, ``numba.njit`` and ``numba.jit`` cache by default (the caller's
    own ``cache=False`` stands); for importing umap, whose import compiles code.

    Blocks in several threads may overlap: numba's own functions are put back when
    the last one ends, never a patched one kept as if it were numba's.
    """
    global _patch_depth, _numba_own
    try:
        import numba
    except ImportError:
        yield
        return
    with _patch_lock:
        if _patch_depth == 0:
            _numba_own = numba.njit, numba.jit
            numba.njit, numba.jit = _cached(numba.njit), _cached(numba.jit)
        _patch_depth += 1
    try:
        yield
    finally:
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0 and _numba_own is not None:
                numba.njit, numba.jit = _numba_own
                _numba_own = None


def cache_compiled() -> int:
    """Give every uncached numba function of umap and pynndescent a disk cache; returns
    how many. Call after importing umap and before its first fit."""
    try:
        from numba.core.caching import NullCache
        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return 0
    done = 0
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in _PACKAGES:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache):
                try:
                    value.enable_caching()
                except (RuntimeError, OSError, TypeError):  # no file to key it on
                    continue
                done += 1
    return done


def first_fit_note(path: Path | None = None) -> str:
    """What a kernel's first UMAP fit costs, for the projector to say while it runs."""
    root = path or cache_dir()
    if cache_is_warm(root):
        return f"UMAP: loading umap-learn; its compiled code is read from {root}, not compiled"
    return (
        "UMAP: loading umap-learn and compiling its code, a minute or more in this kernel; "
        f"kept in {root} so later kernels skip it"
    )
