"""
Data-parallel passes on a Dask cluster: ``ParameterMixing``
===========================================================

Not run at documentation build time (it starts a cluster of worker
processes); run it with ``python examples/dask_parameter_mixing.py`` after
``pip install ".[dask]"``.

``sklearn_secondorder.dask.ParameterMixing`` makes each worker run the
estimator's own pass over its partitions, then mixes the models (each
method's state by its own rule: averages for the weights, PSA's step sizes,
SGD-QN's rescaling) and sends the mixed model back for the next pass. With
one worker the model is the estimator's single-machine pass, bit for bit.

``benchmarks/RESULTS.md`` (``python benchmarks/bench_dask.py --replicate 15
--tagger-passes 2``): one pass on 3.2 M hashed CoNLL-2000 token rows reaches
the single machine's accuracy within 0.03 points for PSA, plain SGD and
SGD-QN; on the shared 2-core machine of that run, two workers were not faster
in wall time (see :doc:`/results`).
"""
# sphinx_gallery_thumbnail_path = "_static/thumbnails/dask_parameter_mixing.png"
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster
from sklearn.datasets import make_classification

from sklearn_secondorder import PSAClassifier
from sklearn_secondorder.dask import ParameterMixing


def main():
    X, y = make_classification(n_samples=200_000, n_features=50, n_informative=20,
                               random_state=0)
    Xd = da.from_array(X, chunks=(25_000, 50))
    yd = da.from_array(y, chunks=25_000)
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        mixed = ParameterMixing(PSAClassifier(alpha=1e-5, random_state=0), max_iter=1)
        mixed.fit(Xd, yd)
        model = mixed.estimator_          # an ordinary fitted PSAClassifier
    single = PSAClassifier(alpha=1e-5, random_state=0).fit(X, y)
    print(f"training accuracy, 2 workers mixed: {model.score(X, y):.4f}; "
          f"one machine: {single.score(X, y):.4f}")
    np.testing.assert_array_equal(model.classes_, single.classes_)


if __name__ == "__main__":
    main()
