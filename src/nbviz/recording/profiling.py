"""``Run.profile``: a profiled training step, stored in ``profiles`` at a step.

The profiling itself is :func:`nbviz.probes.profile.profile_step`; a profile
named ``name`` is stored as JSON, and its Chrome trace (when kept) beside it as
``name/trace``. Storing again at the same step and name replaces both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbviz import records as rec

if TYPE_CHECKING:  # torch is imported where a model is run
    from torch import nn

    from nbviz.analysis.profile import Profile
    from nbviz.store import Writer

__all__ = ["record_profile"]


def record_profile(
    writer: Writer,
    model: nn.Module,
    step_fn: Any,
    *,
    step: Any,
    name: Any,
    latest: int,
    options: dict[str, Any],
) -> Profile:
    """Profile ``step_fn`` on ``model`` and commit it at ``step`` (None: ``latest``)."""
    from nbviz.probes.profile import profile_step

    if not isinstance(name, str) or not name or name.endswith("/trace"):
        raise ValueError(
            f"profile: name must be a non-empty string not ending in /trace, got {name!r}"
        )
    step = rec.check_step(latest if step is None else step, "profile")
    result = profile_step(model, step_fn, name=name, step=step, **options)
    writer.insert("profiles", [(step, name, result.to_json())])
    if result.trace is not None:
        writer.insert("profiles", [(step, f"{name}/trace", result.trace)])
    else:
        writer.execute("DELETE FROM profiles WHERE step = ? AND name = ?", (step, f"{name}/trace"))
    writer.flush()
    return result
