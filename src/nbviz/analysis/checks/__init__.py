"""The checks behind ``run.diagnose()``, one module per problem.

Each check is a function ``check(run) -> list[Finding]`` that reads a run through
its read API only (``scalars``, ``stats``, ``unit_stats``, ``events``,
``predictions``, ``meta``) and says nothing when the run lacks what it needs.
:mod:`nbviz.analysis.diagnose` runs them and turns the findings into a frame.
"""
