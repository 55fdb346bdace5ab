"""The ``ParameterMixing`` meta-estimator: partitions, passes and mixing on a
``distributed.Client``."""
import pickle
import time
from numbers import Integral

import dask
import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import distributed
import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_regressor

from .._compat import Interval, check_is_fitted
from ..linear import SBMLogisticRegression
from ..sequence._base import _BaseSequenceTagger
from ..sequence._input import KIND_ARRAYS, KIND_DICTS
from ._rules import _rule_for
from ._start import _resolve_auto, _start_regressor, _start_tagger
from ._transport import (
    _balance,
    _bundle,
    _identity,
    _join,
    _linear_counts,
    _linear_labels,
    _rehydrate,
    _slim,
    _summary,
    _tagger_counts,
    _worker_pass,
)


# ---- the meta-estimator ------------------------------------------------------------
class ParameterMixing(MetaEstimatorMixin, BaseEstimator):
    """Data-parallel training by iterative parameter mixing on a Dask cluster.

    Each pass, every worker of the default ``distributed.Client`` runs the
    estimator's own pass (one ``partial_fit`` call, the compiled kernel) over
    the partitions it holds, starting from the current mixed model; the
    workers' models are then combined by the estimator's mixing rule
    (``MIXING_RULES``: weights averaged by rows seen, sums over rows such as
    SGD-QN's ``1/B`` and SBM's ``M^-1`` summed, PSA step sizes averaged in log
    space; the module docstring and ``doc/dask.md`` give each rule and why).
    This is iterative parameter mixing (McDonald, Hall and Mann 2010); one
    pass is the one-shot parameter averaging of Zinkevich et al. (2010).

    A worker's partitions are joined once, on the worker (taggers: vectorised
    once with the shared vocabulary), and each pass is one ``partial_fit`` (the
    taggers' core) over them, so a worker's rows are shuffled together.

    The partitions are computed on the workers and stay there: the client
    receives partition lengths, labels and (bags) attribute names, and one
    model per worker per pass. Every worker of the client trains: when the
    scheduler computed the partitions unevenly (e.g. all on one worker),
    some are moved once, worker to worker, to even out the rows before the
    first pass. ``estimator_`` is an ordinary fitted estimator.

    Before the first pass, the ``'auto'`` settings of the estimator (step size
    calibration, PSA's period, SGD-QN's ``t0`` and ``skip``) are resolved once
    on the first ``n_calibration_rows`` rows of the first partition, on its
    worker, so that all workers start alike; the classes (and, for taggers on
    feature dicts, the attribute vocabulary) are computed from all partitions
    first, on the workers, unless ``classes`` is passed.

    Parameters
    ----------
    estimator : estimator object
        One of the package's linear classifiers (``PSAClassifier``,
        ``PlainSGDClassifier``, ``SGDQNLinearSVC``, ``SBMLogisticRegression``
        at full rank), regressors (``PSARegressor``, ``PlainSGDRegressor``:
        every worker continues one ``start_model`` made on the first
        partition's first ``n_calibration_rows`` rows, so that all share its
        centred columns and step sizes, and the mix, of the same rule as the
        classifier's, is the model of the averaged weights) or sequence
        taggers (``SGDSequenceTagger``,
        ``ASFSequenceTagger``, ``PSASequenceTagger``,
        ``AveragedPerceptronSequenceTagger``, ``PassiveAggressiveSequenceTagger``,
        ``AROWSequenceTagger``). It is cloned.
    max_iter : int or None, default=None
        Passes over the data, each followed by a mixing step. None: the
        estimator's ``max_iter``.
    n_calibration_rows : int, default=10000
        Rows (sequences for taggers) of the first partition on which the
        ``'auto'`` settings are resolved.

    Attributes
    ----------
    estimator_ : estimator object
        The mixed model after the last pass, an ordinary fitted estimator.
    classes_ : ndarray of shape (n_classes,)
        The class labels (classifiers and taggers).
    n_iter_ : int
        Passes made.
    n_workers_ : int
        Workers that held partitions (and trained).
    partitions_ : list of list of int
        The partition indices each worker trained on, in worker order (the
        order of the models in each mixing step).
    rows_per_worker_ : list of int
        Rows (sequences) each worker holds; the mixing weights are their shares.
    pass_seconds_ : list of float
        Wall time of every pass (the workers' passes, transfers included).
    mix_seconds_ : list of float
        Wall time of every mixing step on the client.
    worker_seconds_ : list of list of float
        For every pass, the seconds of each worker's pass on the worker (its
        partitions joined and ``partial_fit``), without the transfers.
    worker_cpu_seconds_ : list of list of float
        The same passes in CPU seconds of the worker process (what the pass
        costs whatever else runs on the machine).
    model_bytes_ : int
        Size of the pickled model a worker sends back per pass (the largest);
        the start it receives is about as large. The exported arrays
        (``coef_``...) are left out: they are rebuilt from the state.
    resolved_params_ : dict
        The ``'auto'`` settings as resolved before the first pass.

    See Also
    --------
    dask_ml.wrappers.Incremental : Out-of-core training of one model, one
        block after another (one worker's CPU).

    References
    ----------
    R. McDonald, K. Hall and G. Mann. Distributed training strategies for the
    structured perceptron. NAACL 2010 (iterative parameter mixing).

    M. Zinkevich, M. Weimer, A. Smola and L. Li. Parallelized stochastic
    gradient descent. NIPS 2010.

    Examples
    --------
    >>> import dask.array as da                                  # doctest: +SKIP
    >>> from distributed import Client, LocalCluster             # doctest: +SKIP
    >>> from sklearn_secondorder import PSAClassifier            # doctest: +SKIP
    >>> from sklearn_secondorder.dask import ParameterMixing     # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2))               # doctest: +SKIP
    >>> X = da.random.random((100_000, 20), chunks=25_000)       # doctest: +SKIP
    >>> y = (X[:, 0] > 0.5).astype(int)                          # doctest: +SKIP
    >>> model = ParameterMixing(PSAClassifier()).fit(X, y)       # doctest: +SKIP
    >>> model.estimator_.predict(X[:5].compute())                # doctest: +SKIP
    """

    _parameter_constraints: dict = {
        "estimator": "no_validation",  # (checked by _rule_for)
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "n_calibration_rows": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, estimator, *, max_iter=None, n_calibration_rows=10_000):
        self.estimator = estimator
        self.max_iter = max_iter
        self.n_calibration_rows = n_calibration_rows

    # ---- input ------------------------------------------------------------------
    def _partitions(self, X, y, sample_weight):
        """The delayed partitions of the input and whether it is a tagger's bag."""
        if isinstance(X, db.Bag):
            if y is not None or sample_weight is not None:
                raise ValueError("a dask.bag X holds (sentence, labels) pairs: pass y=None "
                                 "and no sample_weight.")
            return list(X.to_delayed()), True, None
        columns = None
        if isinstance(X, dd.DataFrame):
            cols = list(X.columns)
            if all(isinstance(c, str) for c in cols):
                columns = np.asarray(cols, dtype=object)
            xparts = list(X.to_delayed())
        elif isinstance(X, da.Array):
            if X.ndim != 2:
                raise ValueError(f"X must be a 2-D dask array, got {X.ndim} dimension(s).")
            if X.numblocks[1] > 1:
                X = X.rechunk({1: -1})  # row blocks only (a graph step, on the workers)
            xparts = list(X.to_delayed().ravel())
        else:
            raise TypeError(
                f"X is a {type(X).__name__}: ParameterMixing trains on a dask.array, a "
                "dask.dataframe (linear estimators) or a dask.bag of (sentence, labels) "
                "pairs (taggers); fit the estimator itself on in-memory data.")
        others = [y] + ([sample_weight] if sample_weight is not None else [])
        oparts = []
        for name, a in zip(("y", "sample_weight"), others):
            if isinstance(a, (dd.Series, dd.DataFrame)):
                pa = list(a.to_delayed())
            elif isinstance(a, da.Array):
                if isinstance(X, da.Array) and a.chunks[0] != X.chunks[0]:
                    a = a.rechunk({0: X.chunks[0]})
                pa = list(a.to_delayed().ravel())
            else:
                raise TypeError(f"{name} must be a dask array or series partitioned like X, "
                                f"got {type(a).__name__}.")
            if len(pa) != len(xparts):
                raise ValueError(f"X has {len(xparts)} partitions but {name} has {len(pa)}: "
                                 "partition them alike.")
            oparts.append(pa)
        parts = [dask.delayed(_bundle)(x, *rest) for x, *rest in zip(xparts, *oparts)]
        return parts, False, columns

    # ---- fitting ------------------------------------------------------------------
    def fit(self, X, y=None, *, classes=None, sample_weight=None):
        """Train with ``max_iter`` passes, mixing the workers' models after each.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or dask.bag.Bag
            Linear estimators: rows, chunked along the rows only (dense or
            ``scipy.sparse`` CSR blocks), or a DataFrame. Taggers: a bag of
            ``(sentence, labels)`` pairs, each sentence a list of token feature
            dicts (or a 2-D array).
        y : dask.array.Array or dask.dataframe.Series, default=None
            The labels, partitioned like ``X`` (None for a bag).
        classes : array-like, default=None
            All the labels. None: computed from ``y`` (the bag) on the workers
            before the first pass.
        sample_weight : dask.array.Array or dask.dataframe.Series, default=None
            Row weights, partitioned like ``X`` (linear estimators only).

        Returns
        -------
        self : object
            The fitted meta-estimator.
        """
        self._validate_params()
        rule = _rule_for(self.estimator)
        penalty = getattr(self.estimator, "penalty", "l2")
        if penalty != "l2":
            # (the cumulative L1 penalty's per-weight state has no mixing rule yet)
            raise ValueError(f"ParameterMixing mixes L2-penalised models only; got "
                             f"penalty={penalty!r}. Use penalty='l2'.")
        client = distributed.get_client()
        parts, tagger, columns = self._partitions(X, y, sample_weight)
        if tagger != isinstance(self.estimator, _BaseSequenceTagger):
            raise TypeError(f"{type(self.estimator).__name__} needs "
                            + ("a dask.bag of (sentence, labels) pairs." if not tagger else
                               "a dask array or dataframe X with y."))
        futures = client.compute(parts)  # the partitions, computed where they will stay
        try:
            return self._fit_on(client, rule, futures, tagger, classes, columns, X)
        finally:
            client.cancel(futures)

    def _fit_on(self, client, rule, futures, tagger, classes, columns, X):
        distributed.wait(futures)
        summaries = client.gather([client.submit(_summary, f, tagger, pure=False)
                                   for f in futures])
        rows = [s["n"] for s in summaries]
        n_rows = int(sum(rows))
        if n_rows == 0:
            raise ValueError("X has no rows: every partition is empty.")
        if is_regressor(self.estimator):
            classes = None
        elif classes is None:
            if tagger:
                classes = np.unique(np.asarray(list(set().union(
                    *[s["labels"] for s in summaries]))))
            else:
                classes = np.unique(np.concatenate(client.gather(
                    [client.submit(_linear_labels, f, pure=False) for f in futures])))
        if classes is not None:
            classes = np.unique(np.asarray(classes))
        by_worker, workers = self._place(client, futures, rows)
        model, start = self._start(client, rule, futures[by_worker[workers[0]][0]],
                                   workers[0], tagger, classes, summaries, n_rows, X)
        model = self._passes(client, rule, futures, by_worker, workers, rows, model, start,
                             tagger, classes)
        if not is_regressor(model):
            self.classes_ = model.classes_
        if hasattr(model, "n_features_in_"):
            self.n_features_in_ = model.n_features_in_
        return self

    def _place(self, client, futures, rows):
        """The workers and their partitions (in partition order), the
        partitions moved once, worker to worker, to even out the rows."""
        who = client.who_has(futures)
        place = {i: sorted(who[f.key])[0] for i, f in enumerate(futures) if rows[i] > 0}
        moves = _balance(place, rows, sorted(client.scheduler_info()["workers"]))
        for i, w in moves.items():   # once, worker to worker (never via the client)
            futures[i] = client.submit(_identity, futures[i], workers=[w],
                                       allow_other_workers=False, pure=False)
            place[i] = w
        distributed.wait(futures)
        by_worker = {}
        for i in sorted(place):
            by_worker.setdefault(place[i], []).append(i)
        workers = sorted(by_worker, key=lambda w: by_worker[w][0])
        return by_worker, workers

    def _start(self, client, rule, first, worker, tagger, classes, summaries, n_rows, X):
        """The model every worker's first pass continues and the ``start`` of
        the first mixing step (None: the estimator itself, started afresh):
        the ``'auto'`` settings resolved on the first rows of the partition
        ``first`` (a future), on its ``worker``; a tagger's zero state over
        the shared vocabulary; a regressor's ``start_model`` on those rows."""
        model = clone(self.estimator)
        auto = [name for name in rule.auto_params if model.get_params()[name] == "auto"]
        self.resolved_params_ = {}
        if auto:
            resolved = client.submit(
                _resolve_auto, model, first, classes, tagger,
                self.n_calibration_rows, n_rows, workers=[worker], pure=False).result()
            self.resolved_params_ = {k: resolved[k] for k in auto}
            model.set_params(**self.resolved_params_)
        start = None
        if tagger:
            start = model = _start_tagger(model, summaries, classes)
        elif is_regressor(model):
            # every worker continues one start: the same centred columns and
            # step sizes, so that their models mix
            start = model = client.submit(
                _start_regressor, model, first, self.n_calibration_rows,
                workers=[worker], pure=False).result()
        elif isinstance(model, SBMLogisticRegression):
            K = 1 if classes.size == 2 else classes.size
            rank = model.rank_for(X.shape[1], K)
            if rank is not None:
                raise ValueError(
                    f"ParameterMixing mixes SBMLogisticRegression at full rank only (rank="
                    f"{self.estimator.rank!r} gives rank {rank} for {X.shape[1]} features): "
                    "the low-rank factors of different workers do not add up to a rank-k "
                    "bound. Pass rank=None.")
        return model, start

    def _passes(self, client, rule, futures, by_worker, workers, rows, model, start, tagger,
                classes):
        """``max_iter`` passes, each the workers' ``partial_fit`` on their
        partitions (joined once, on the worker) and a mixing step; the
        timings and sizes recorded. Returns the mixed model."""
        # each worker's partitions joined once, on the worker; the partitions go
        vocabulary = getattr(model, "vocabulary_", None) if tagger else None
        # (the start has a vocabulary for feature dicts, none for numeric arrays)
        kind = (KIND_DICTS if vocabulary is not None else KIND_ARRAYS) if tagger else None
        [vocab_f] = client.scatter(
            [vocabulary if kind == KIND_DICTS else getattr(model, "n_features_in_", None)],
            broadcast=True, hash=False)
        batches = [client.submit(_join, [futures[i] for i in by_worker[w]], tagger, classes,
                                 kind, vocab_f, workers=[w], allow_other_workers=False,
                                 pure=False)
                   for w in workers]
        distributed.wait(batches)
        futures.clear()   # (released, not cancelled: that would cancel the batches too)
        del vocab_f

        max_iter = self.max_iter if self.max_iter is not None else self.estimator.max_iter
        self.pass_seconds_, self.mix_seconds_ = [], []
        self.model_bytes_ = 0
        w_rows = np.asarray([sum(rows[i] for i in by_worker[w]) for w in workers], dtype=float)
        shares = w_rows / w_rows.sum()
        self.worker_seconds_, self.worker_cpu_seconds_ = [], []
        mixing = len(workers) > 1
        for _ in range(max_iter):
            tic = time.perf_counter()
            [start_f] = client.scatter([_slim(model)], broadcast=True, hash=False)
            tasks = [client.submit(_worker_pass, start_f, classes, tagger, b, mixing,
                                   workers=[w], allow_other_workers=False, pure=False)
                     for w, b in zip(workers, batches)]
            results = client.gather(tasks)
            del start_f
            self.pass_seconds_.append(time.perf_counter() - tic)
            self.worker_seconds_.append([r[2] for r in results])
            self.worker_cpu_seconds_.append([r[3] for r in results])
            self.model_bytes_ = max(self.model_bytes_, *(
                len(pickle.dumps(r[0], protocol=pickle.HIGHEST_PROTOCOL)) for r in results))
            tic = time.perf_counter()
            # (one worker: its model is the mixed model, the identity of every rule)
            model = (results[0][0] if not mixing else
                     rule.mix([r[0] for r in results], shares, start))
            self.mix_seconds_.append(time.perf_counter() - tic)
            if vocabulary is not None:   # (kept here: the workers' batches are vectorised)
                model.vocabulary_ = vocabulary
            start = model
        del batches
        _rehydrate(model, export=True)
        model.n_iter_ = max_iter
        self.estimator_ = model
        self.n_iter_ = max_iter
        self.n_workers_ = len(workers)
        self.partitions_ = [list(by_worker[w]) for w in workers]
        self.rows_per_worker_ = [int(r) for r in w_rows]
        return model

    # ---- prediction ---------------------------------------------------------------
    def _apply(self, method, X):
        check_is_fitted(self)
        est = self.estimator_
        fn = getattr(est, method)
        if isinstance(X, db.Bag):
            return X.map_partitions(lambda part: fn(list(part)))
        if isinstance(X, da.Array):
            if X.numblocks[1] > 1:
                X = X.rechunk({1: -1})
            parts = list(X.to_delayed().ravel())
        elif isinstance(X, dd.DataFrame):
            parts = list(X.to_delayed())
        else:
            return fn(X)
        outs = [dask.delayed(fn)(p) for p in parts]
        classes = getattr(est, "classes_", None)      # (None: a regressor)
        one_column = method == "predict" or (method == "decision_function"
                                             and len(classes) == 2)
        dtype = classes.dtype if method == "predict" and classes is not None else np.float64
        shape = (np.nan,) if one_column else (np.nan, len(est.classes_))
        return da.concatenate([da.from_delayed(o, shape=shape, dtype=dtype) for o in outs])

    def predict(self, X):
        """Predict with ``estimator_``, partition by partition for Dask input.

        Parameters
        ----------
        X : dask collection or in-memory input
            Rows (dask array / dataframe), a bag of sentences, or what
            ``estimator_.predict`` takes.

        Returns
        -------
        y_pred : dask.array.Array, dask.bag.Bag or the estimator's output
            Lazy for Dask input (a bag of label lists for a bag).
        """
        return self._apply("predict", X)

    def predict_proba(self, X):
        """Estimate the class probabilities with ``estimator_`` (probabilistic losses).

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or in-memory rows
            The rows.

        Returns
        -------
        proba : dask.array.Array or ndarray of shape (n_samples, n_classes)
            Lazy for Dask input.
        """
        return self._apply("predict_proba", X)

    def decision_function(self, X):
        """Compute the scores of ``estimator_`` (linear estimators).

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or in-memory rows
            The rows.

        Returns
        -------
        scores : dask.array.Array or ndarray
            Lazy for Dask input.
        """
        return self._apply("decision_function", X)

    def score(self, X, y=None):
        """Return the accuracy of ``estimator_`` (flat token accuracy for taggers).

        Parameters
        ----------
        X : dask collection or in-memory input
            Rows, or a bag of ``(sentence, labels)`` pairs (then ``y=None``).
        y : dask.array.Array, dask.dataframe.Series, array-like or None
            The labels.

        Returns
        -------
        score : float
            Computed on the workers for Dask input (only counts travel).
        """
        check_is_fitted(self)
        est = self.estimator_
        if isinstance(X, db.Bag):
            counts = X.map_partitions(lambda part: [_tagger_counts(est, part)])
            got = np.sum(np.asarray(counts.compute(), dtype=float).reshape(-1, 2), axis=0)
            return float(got[0] / got[1])
        if isinstance(X, (da.Array, dd.DataFrame)):
            parts, _, _ = self._partitions(X, y, None)
            counts = dask.compute(*[dask.delayed(_linear_counts)(est, p) for p in parts])
            got = np.sum(np.asarray(counts, dtype=float), axis=0)
            return float(got[0] / got[1])
        return est.score(X, y)
