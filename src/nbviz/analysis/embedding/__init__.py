"""The parts of :mod:`nbviz.analysis.projection`, one concept per module.

- :mod:`~nbviz.analysis.embedding.methods`: the methods' names, parameters and
  whether their package can be imported here;
- :mod:`~nbviz.analysis.embedding.fit`: ``project``, a matrix laid out in 2-d,
  fitted on a sample above ``fit_size`` rows and the rest placed into that map;
- :mod:`~nbviz.analysis.embedding.pca`, :mod:`~nbviz.analysis.embedding.tsne`,
  :mod:`~nbviz.analysis.embedding.umap`: each method's fit and placement;
- :mod:`~nbviz.analysis.embedding.align`: layouts carried over training (warm
  start, Procrustes on the ids two steps share);
- :mod:`~nbviz.analysis.embedding.layout`: a run's layout, its cache key and its
  storage in the run;
- :mod:`~nbviz.analysis.embedding.progress`: progress reports and cancellation
  of a long fit (for the projector's background job).

Import :mod:`nbviz.analysis.projection`, which gives the public names of all of
them; nothing here imports torch or a widget library.
"""
