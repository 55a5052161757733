"""The projection methods: their names, parameters, and whether they can run here.

``"pca"`` is numpy alone; ``"tsne"`` needs openTSNE and ``"umap"`` umap-learn,
imported on first use only (umap-learn's import and JIT take 20-35 s in a
fresh process). See :mod:`nbviz.analysis.projection` for what each parameter means;
it gives this module's public names.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import logging
import math
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

METHODS = ("pca", "tsne", "umap")
METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}
METRICS = ("euclidean", "cosine", "manhattan", "correlation")
FIT_SIZE = 20_000
"""Above this many points a method is fitted on a sample of this size (``fit_size``)."""

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "pca": {"seed": 0, "fit_size": FIT_SIZE},
    "tsne": {
        "perplexity": 30.0,
        "metric": "euclidean",
        "n_iter": 500,
        "seed": 0,
        "fit_size": FIT_SIZE,
    },
    "umap": {
        "n_neighbors": 15,
        "min_dist": 0.1,
        "metric": "euclidean",
        "seed": 0,
        "fit_size": FIT_SIZE,
    },
}

_PACKAGES = {"tsne": ("openTSNE", "openTSNE"), "umap": ("umap", "umap-learn")}


class MethodUnavailableError(RuntimeError):
    """The package behind a method is missing or fails to import; the message says which."""


def check_method(method: str) -> str:
    """``method`` if it is one of METHODS, else ValueError naming the closest."""
    if method not in METHODS:
        close = difflib.get_close_matches(str(method), METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown projection method {method!r}{hint}; choose one of {', '.join(METHODS)}"
        )
    return method


def _as_int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"projection parameter {name} must be an integer, got {value!r}")
    if float(value) != int(value):
        raise ValueError(f"projection parameter {name} must be an integer, got {value!r}")
    if int(value) < lo:
        raise ValueError(f"projection parameter {name} must be >= {lo}, got {value!r}")
    return int(value)


def _as_float(name: str, value: Any, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"projection parameter {name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise ValueError(f"projection parameter {name} must be in {bound}, got {value!r}")
    return v


def resolve_params(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full, checked parameters of ``method``: defaults overlaid with ``params``.

    Raises ValueError naming an unknown parameter (and the valid ones) or a
    value out of range, TypeError for a value of the wrong type.
    """
    check_method(method)
    out = dict(DEFAULT_PARAMS[method])
    for name, value in dict(params or {}).items():
        if name not in out:
            close = difflib.get_close_matches(str(name), list(out), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"{METHOD_LABELS[method]} has no parameter {name!r}{hint}; "
                f"its parameters are {', '.join(out)}"
            )
        out[name] = value
    out["seed"] = _as_int("seed", out["seed"], 0)
    out["fit_size"] = _as_int("fit_size", out["fit_size"], 100)
    if "metric" in out and out["metric"] not in METRICS:
        raise ValueError(
            f"projection parameter metric must be one of {', '.join(METRICS)}, "
            f"got {out['metric']!r}"
        )
    if method == "tsne":
        out["perplexity"] = _as_float("perplexity", out["perplexity"], 0.0, 1e4, lo_open=True)
        out["n_iter"] = _as_int("n_iter", out["n_iter"], 1)
    if method == "umap":
        out["n_neighbors"] = _as_int("n_neighbors", out["n_neighbors"], 2)
        out["min_dist"] = _as_float("min_dist", out["min_dist"], 0.0, 1.0)
    return out


def method_unavailable(method: str) -> str | None:
    """None when ``method`` can run here, else a readable reason (nothing is imported)."""
    check_method(method)
    if method == "pca":
        return None
    module, package = _PACKAGES[method]
    if importlib.util.find_spec(module) is None:
        return (
            f"{METHOD_LABELS[method]} is unavailable: the {package} package is not "
            f"installed (pip install {package})"
        )
    return None


def import_method(method: str) -> Any:
    """The package behind ``method`` (openTSNE, umap), or MethodUnavailableError saying why."""
    module, package = _PACKAGES[method]
    reason = method_unavailable(method)
    if reason:
        raise MethodUnavailableError(reason)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except Exception as exc:  # a broken install (numba, llvmlite, a C extension)
        raise MethodUnavailableError(
            f"{METHOD_LABELS[method]} is unavailable: importing {package} failed with "
            f"{type(exc).__name__}: {exc} (reinstall it: pip install --force-reinstall {package})"
        ) from exc


@contextlib.contextmanager
def quiet(logger: str) -> Iterator[None]:
    """Silence a method's package while it fits: its logger below ERROR, and warnings."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)
