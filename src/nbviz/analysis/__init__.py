"""Analysis on what a run recorded: pure functions on numpy and pandas.

Metrics, embedding projections and diagnostics live here, one concept per
module (``nbviz.analysis.projection``, ...). Nothing here imports torch or a
widget library; import the module you need, this package imports nothing itself.
"""
