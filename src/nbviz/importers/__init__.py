"""Runs recorded by other tools, read into nbviz's run store.

Each importer reads another tool's files with that tool's own reader and
writes an ordinary nbviz run (one ``run.sqlite``), so every view and the
diagnosis work on it unchanged. A file from elsewhere is data: it is checked
as it is read, and a damaged or hostile one gives a clear error.
"""
