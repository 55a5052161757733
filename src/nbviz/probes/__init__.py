"""Torch hooks that watch a model while it trains and hand records to the run store."""

from nbviz.probes.probe import Probe

__all__ = ["Probe"]
