"""nbviz views: anywidget classes that read a Run and show it.

Each view is one module here plus one ESM entry in ``js/`` bundled into
``nbviz/static/``; see ``nbviz.widgets.base``. Import views from ``nbviz``
(``nbviz.LossCurves``) or from their modules; this package imports nothing
itself, so loading one view does not load them all.
"""
