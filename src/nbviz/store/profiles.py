"""Read queries on ``profiles``: stored per-module profiles and their Chrome traces.

A profile named ``name`` is a JSON payload; its trace, when kept, is the row
named ``name/trace``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.columns import frame, int_array, json_value
from nbviz.store.query import MissingStepError, ReaderBase, and_equal

__all__ = ["ProfileQueries"]

_PROFILES = "FROM profiles WHERE name NOT LIKE '%/trace'"


class ProfileQueries(ReaderBase):
    """Profiles by step and name."""

    def profiles(self, step: int | None = None) -> pd.DataFrame:
        """Profiles ``[step, name, payload]`` (payload decoded JSON); all steps when None.

        Chrome traces (rows named ``<name>/trace``) are left out: see :meth:`profile_trace`.
        """
        where, params = and_equal(step=None if step is None else int(step))
        rows = self._q(f"SELECT step, name, payload {_PROFILES}{where} ORDER BY step, name", params)
        return frame(rows, ("step", "name", "payload"), "isj")

    def profile_steps(self, name: str | None = None) -> np.ndarray:
        """Sorted steps with a stored profile (of ``name``, or any name), int64."""
        where, params = and_equal(name=name)
        rows = self._q(f"SELECT DISTINCT step {_PROFILES}{where} ORDER BY step", params)
        return int_array(r[0] for r in rows)

    def load_profile(self, step: int | None = None, name: str | None = None) -> dict[str, Any]:
        """One stored profile's payload: at ``step`` (default: the latest), named ``name``.

        Without ``name`` the step must hold one profile (or one named ``"profile"``).
        Raises MissingStepError naming the recorded steps when there is none.
        """
        steps = self.profile_steps(name)
        if step is None:
            if not len(steps):
                raise MissingStepError(
                    f"no profiles in run at {self.run_dir}"
                    + (f" named {name!r}" if name is not None else "")
                    + "; record one with run.profile(model, step_fn)"
                )
            step = int(steps[-1])
        where, params = and_equal(step=int(step), name=name)
        rows = self._q(f"SELECT name, payload {_PROFILES}{where} ORDER BY name", params)
        if not rows:
            raise MissingStepError(
                f"no profile{f' named {name!r}' if name else ''} at step {step}; "
                f"profiles are stored at: {', '.join(map(str, steps)) or 'no steps'}"
            )
        if len(rows) > 1:
            named = dict(rows)
            if "profile" not in named:
                raise ValueError(
                    f"step {step} holds profiles {', '.join(named)}: pass name= to choose one"
                )
            return json_value(named["profile"])
        return json_value(rows[0][1])

    def profile_trace(self, step: int, name: str = "profile") -> str | None:
        """The Chrome trace (JSON text) stored with profile ``name`` at ``step``, or None."""
        return self._one(
            "SELECT payload FROM profiles WHERE step = ? AND name = ?",
            (int(step), f"{name}/trace"),
        )
