"""What a :class:`nbviz.Run` does when it records, one concept per module.

``nbviz/run.py`` is the facade: its recording methods hand their work to
these modules and write what comes back.

- :mod:`~nbviz.recording.tables`: what ``log_predictions``, ``log_embeddings`` and
  ``log_samples`` are given, checked and made into store rows;
- :mod:`~nbviz.recording.evaluation`: ``evaluate``, one pass over a loader recorded
  as predictions, embeddings, samples and captures;
- :mod:`~nbviz.recording.capture`: ``capture``, one sample through the layers;
- :mod:`~nbviz.recording.profiling`: ``profile``, a profiled step stored at a step;
- :mod:`~nbviz.recording.curvature`: ``curvature``, the curvature test stored at a step;
- :mod:`~nbviz.recording.ranks`: the process's place under ``torch.distributed``;
- :mod:`~nbviz.recording.watching`: ``watch``, one watched model per name.

Argument checks shared with the probes live in :mod:`nbviz.records`. torch is
imported only where a model is run.
"""
