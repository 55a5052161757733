"""nbviz inside the training loops people already use.

- :mod:`nbviz.integrations.transformers`: ``NbvizCallback`` for Hugging Face's
  ``Trainer`` (``pip install 'nbviz[transformers]'``).
- :mod:`nbviz.integrations.lightning`: ``NbvizLogger`` and ``NbvizCallback`` for
  PyTorch Lightning (``pip install 'nbviz[lightning]'``).

Each integration records through the public :class:`nbviz.Run` API, so what it
writes is an ordinary run, read by every view.
"""
