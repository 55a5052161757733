"""The version of nbviz: one source, read by the build and by the run store's meta."""

__version__ = "0.1.0"
