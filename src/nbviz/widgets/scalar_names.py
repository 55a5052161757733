"""How scalars and runs are named on screen: a scalar's stem and split, a run's legend name.

``train_loss`` and ``val_loss`` are one stem (``loss``) in two splits, drawn on one
panel of the loss curves and compared in one column group of the runs table; two
runs of the same name are told apart by a number.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SPLITS", "split_name", "unique_names"]

#: Prefixes/suffixes that name a split; ``loss`` alone is the training loss.
SPLITS = ("train", "training", "val", "valid", "validation", "test", "eval")


def split_name(name: str) -> tuple[str, str]:
    """``(stem, split)`` of a scalar name: ``"val_loss"`` -> ``("loss", "val")``.

    Recognises ``<split>_x``, ``x_<split>``, ``<split>/x`` and ``x/<split>``;
    ``loss`` alone is ``("loss", "train")``; anything else is ``(name, "")``.
    """
    for split in SPLITS:
        for sep in ("_", "/", "-"):
            if name.startswith(split + sep) and len(name) > len(split) + 1:
                return name[len(split) + 1 :], split
            if name.endswith(sep + split) and len(name) > len(split) + 1:
                return name[: -len(split) - 1], split
    if name == "loss":
        return "loss", "train"
    return name, ""


def unique_names(runs: list[Any]) -> list[str]:
    """Run names for the legend; repeated names get ' (2)', ' (3)', ..."""
    out: list[str] = []
    for run in runs:
        base = str(getattr(run, "name", None) or run)
        name, k = base, 2
        while name in out:
            name, k = f"{base} ({k})", k + 1
        out.append(name)
    return out
