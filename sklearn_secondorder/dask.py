"""Data-parallel training on a Dask cluster: iterative parameter mixing.

``ParameterMixing(estimator)`` trains any estimator of the package on a
``dask.array`` / ``dask.dataframe`` (linear classifiers) or a ``dask.bag`` of
``(sentence, labels)`` pairs (sequence taggers) held by the workers of a
``distributed.Client``. Every pass, each worker runs the estimator's own pass
(``partial_fit``, the compiled kernel) over the rows it holds, starting from
the current mixed model; then the workers' models are combined into the next
mixed model (iterative parameter mixing: McDonald, Hall and Mann, NAACL 2010;
Zinkevich, Weimer, Smola and Li, NIPS 2010). The partitions never leave their
workers: only models travel, one per worker and pass each way. The result
``estimator_`` is an ordinary fitted estimator (it pickles, and predicts
without Dask).

How each method's state combines is one rule per estimator class
(``MIXING_RULES``), reading and writing the estimators' typed states. The
rules follow one principle: the iterates are averaged, statistics that are
sums over the rows seen are summed, and adapted multiplicative quantities are
averaged in log space. With ``p_w = n_w / sum n`` the share of the rows worker
``w`` saw in the pass, ``s`` the state the pass started from, and ``W`` the
workers (see ``doc/dask.md`` for the arguments):

================================  =================================================
state                             mixed value
================================  =================================================
weights, intercepts (all)         ``sum_w p_w theta_w`` (Zinkevich et al., Alg. 2)
update counter ``t`` (all)        ``t_s + sum_w (t_w - t_s)``: the rows the model
                                  has been trained on, as on one machine
averaged SGD / ASF sums           ``S_s + sum_w (S_w - S_s)`` and the iterate
                                  counts likewise: the average of every iterate
                                  of every worker (the model a single machine
                                  would average over the same iterates)
PSA step sizes ``eta_i``          ``exp(sum_w p_w log eta_w,i)``, weighted
                                  geometric mean: ``eta`` is a product of
                                  per-window factors, the workers' windows are
                                  parallel estimates of the same contraction
PSA adaptation window             restarted at the mixed weights (both snapshots
                                  set to them); the next event is the first
                                  multiple of ``b`` after ``t``, as for new
                                  attributes
SGD-QN ``1/B``                    ``1/B_s + sum_w (1/B_w - 1/B_s)``: ``1/B`` sums
                                  the secant curvatures of the rows seen (the
                                  erratum's harmonic update), ``alpha (t0 + t)``
                                  without curvature, consistent with ``t``
SGD-QN skip cycle                 restarted (``count = skip``, no pending
                                  re-estimate, ``v`` = the mixed weights)
AP / PA: weights that exist       the union of the workers' (CRFsuite's feature
                                  set of all the sentences seen)
AROW variances ``Sigma_k``        precisions ``1/Sigma_k`` summed as increments
SBM ``Sigma = M^-1``, ``mu``      the bounds' curvature ``C = Sigma - lam I``:
                                  ``C_s + sum_w (C_w - C_s)``, ``mu`` likewise
                                  (sums over the rows seen, Algorithm 2); then
                                  ``Sigma = C + alpha n_t I`` with the workers'
                                  largest ``n_t``; ``phi = M mu``
================================  =================================================

SBM is mixed at full rank only (``rank=None``): the low-rank factors of
different workers do not add up to a rank-``k`` bound.
"""
import copy
import pickle
import time
import warnings
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.utils import check_random_state

from ._compat import Interval, check_is_fitted
from ._validation import check_eta0
from .linear import PlainSGDClassifier, PSAClassifier, SBMLogisticRegression, SGDQNLinearSVC
from .sequence import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PSASequenceTagger,
    SGDSequenceTagger,
)
from .sequence._base import _BaseSequenceTagger
from .sequence._input import (
    KIND_DICTS,
    SequenceBatch,
    flatten_labels,
    input_kind,
    stack_arrays,
    vectorize_dicts,
)

try:
    import dask
    import dask.array as da
    import dask.bag as db
    import dask.dataframe as dd
    import distributed
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "sklearn_secondorder.dask needs dask and distributed: "
        "pip install 'sklearn-secondorder[dask]'") from exc

__all__ = ["ParameterMixing", "MIXING_RULES"]


# ---- the mixing rules --------------------------------------------------------------
def _wavg(arrays, p):
    """``sum_w p_w a_w``."""
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, pw in zip(arrays, p):
        out += pw * np.asarray(a, dtype=np.float64)
    return out


def _sum_increments(values, start):
    """``start + sum_w (v_w - start)``: a statistic that sums over the rows seen."""
    total = start
    for v in values:
        total = total + (v - start)
    return total


def _geomean(arrays, p):
    """``exp(sum_w p_w log a_w)`` (every ``a_w > 0``)."""
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, pw in zip(arrays, p):
        out += pw * np.log(a)
    return np.exp(out)


def _restart_window(kernel, period):
    """Restart PSA's adaptation window at the current weights: every block current
    at ``t``, its next event the first multiple of ``period`` after ``t`` (the
    kernels' sweep expects that alignment), both snapshots the weights. If the
    next event ends a window, its ratio is then the rule's ``x/0`` case: one
    factor in ``[psa_beta, psa_alpha]`` (at most a 1% change with the defaults)."""
    t = kernel.t
    if kernel.snaps is None:   # (dropped for the transfer: _slim)
        n_blocks = kernel.ve.shape[0] // kernel.n_outputs
        kernel.snaps = np.empty((kernel.ve.shape[0], 2))
        kernel.last = np.empty(n_blocks, dtype=np.int64)
        kernel.next_event = np.empty(n_blocks, dtype=np.int64)
    kernel.writable()
    kernel.last[:] = t
    kernel.next_event[:] = (t // period + 1) * period
    kernel.snaps[:, 0] = kernel.weights
    kernel.snaps[:, 1] = kernel.weights


def _mix_sgd_state(states, p, start, est):
    """``LinearSGDState``: weights averaged; averaging sums, counts and ``t`` summed."""
    out = copy.deepcopy(states[0])
    out.coef = _wavg([s.coef for s in states], p)
    out.intercept = _wavg([s.intercept for s in states], p)
    if out.avg_coef is not None:
        zero = start is None
        out.avg_coef = _sum_increments([s.avg_coef for s in states],
                                       0.0 if zero else start.avg_coef)
        out.avg_intercept = _sum_increments([s.avg_intercept for s in states],
                                            0.0 if zero else start.avg_intercept)
        out.n_iterates = float(_sum_increments([s.n_iterates for s in states],
                                               0.0 if zero else start.n_iterates))
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _mix_psa_kernel(kernels, p, start, period):
    """``LazyStepState``: weights averaged, step sizes geometric mean, ``t`` summed,
    window restarted."""
    out = copy.deepcopy(kernels[0])
    out.ve = np.require(out.ve, requirements=["C", "W"])
    out.ve[:, 0] = _wavg([k.weights for k in kernels], p)
    out.ve[:, 1] = _geomean([k.step_sizes for k in kernels], p)
    out.t = int(_sum_increments([k.t for k in kernels], 0 if start is None else start.t))
    _restart_window(out, period)
    return out


def _mix_psa_problem(states, p, start, est):
    out = copy.copy(states[0])
    out.kernel = _mix_psa_kernel([s.kernel for s in states], p,
                                 None if start is None else start.kernel, out.period)
    return out


def _mix_sgdqn_state(states, p, start, est):
    """``SGDQNState``: weights averaged, ``1/B`` and ``t`` summed, skip cycle restarted."""
    out = copy.deepcopy(states[0])
    out.coef = _wavg([s.coef for s in states], p)
    out.intercept = _wavg([s.intercept for s in states], p)
    # on the first pass every worker started from 1/B = alpha t0 (SGDQNState.start)
    invb0 = np.full_like(out.invB, est.alpha * out.t0) if start is None else start.invB
    out.invB = _sum_increments([s.invB for s in states], invb0)
    out.B = 1.0 / out.invB
    out.v = np.concatenate([out.coef, out.intercept])
    out.count = out.skip
    out.update_b = False
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _mix_sbm_state(states, p, start, est):
    """``FullRankState``: ``theta`` averaged; the bounds' curvature
    ``Sigma - lam I`` (``Sigma = M^-1``), ``mu`` and ``t`` summed as increments;
    the regulariser sized for the largest ``n_t`` of the workers (the next pass
    doubles it, as one machine's would, once the rows seen reach it)."""
    out = copy.deepcopy(states[0])
    out.theta = _wavg([s.theta for s in states], p)
    eye = np.eye(out.theta.size)

    def curvature(s):   # the bounds' part of Sigma, without the regulariser
        return _spd_inverse(s.M) - s.lam_total * eye

    data = _sum_increments([curvature(s) for s in states],
                           0.0 if start is None else curvature(start))
    n_ref = max(int(s.n_ref) for s in states)
    out.n_ref, out.lam, out.eta = n_ref, est.alpha * n_ref, est._eta(n_ref)
    out.lam_total = out.lam
    out.M = _spd_inverse(data + out.lam * eye)
    out.mu = _sum_increments([s.mu for s in states], 0.0 if start is None else start.mu)
    out.phi = out.M @ out.mu
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _spd_inverse(A):
    """The inverse of a symmetric positive definite matrix, kept symmetric."""
    inv = np.linalg.inv(A)
    return np.ascontiguousarray(0.5 * (inv + inv.T))


def _mix_linear(state_rule):
    def mix(models, p, start):
        est = copy.deepcopy(models[0])
        for k in range(len(est._states)):
            est._states[k] = state_rule([m._states[k] for m in models], p,
                                        None if start is None else start._states[k], est)
        est.t_ = int(max(s.t for s in est._states))
        est.n_iter_ = 1
        est._export()
        return est
    return mix


def _mix_tagger(with_average, with_psa, online=False):
    def mix(models, p, start):
        est = copy.deepcopy(models[0])
        st, crfs = est._state, [m._state.crf for m in models]
        s_crf = None if start is None else start._state.crf
        if online:
            # the weights that exist: those of the sentences any worker saw
            # (CRFsuite's feature set of the data seen so far)
            for m in models[1:]:
                st.exists = st.exists | m._state.exists
            # the pass's loss, summed over the sentences of every worker
            st.losses[-1] = float(sum(m._state.losses[-1] for m in models))
            if st.cov is not None:
                # AROW: 1/Sigma_k sums delta_k^2 / gamma over the updates
                prec0 = 1.0 / (start._state.cov if start._state.cov is not None
                               else np.full_like(st.cov, float(est.variance)))
                st.cov = 1.0 / _sum_increments([1.0 / m._state.cov for m in models], prec0)
        st.crf.coef = _wavg([c.coef for c in crfs], p)
        if with_average and st.crf.avg is not None:
            st.crf.avg = _sum_increments([c.avg for c in crfs],
                                         0.0 if s_crf is None else s_crf.avg)
            st.crf.n_iterates = float(_sum_increments(
                [c.n_iterates for c in crfs], 0.0 if s_crf is None else s_crf.n_iterates))
        st.crf.t = int(_sum_increments([c.t for c in crfs], 0 if s_crf is None else s_crf.t))
        if with_psa:
            st.psa = _mix_psa_kernel(
                [m._state.psa for m in models], p,
                None if start is None or start._state.psa is None else start._state.psa,
                est.period)
            st.crf.coef = np.ascontiguousarray(st.psa.weights)
        est.t_ = st.crf.t
        est.n_iter_ = 1
        est._model = est._final_flat()
        return est
    return mix


@dataclass(frozen=True)
class MixingRule:
    """How one estimator class is started and mixed.

    Attributes
    ----------
    auto_params : tuple of str
        Parameters whose ``'auto'`` value is resolved once, before the first
        pass, on the first rows of the first partition (every worker must start
        with the same settings).
    resolve : callable
        ``resolve(fitted, n_rows) -> dict``: the concrete values of
        ``auto_params`` read from an estimator fitted on those rows.
    mix : callable
        ``mix(models, p, start) -> estimator``: the mixed model from the
        workers' models, their row shares ``p`` and the model the pass started
        from (None on the first pass).
    """

    auto_params: tuple
    resolve: object
    mix: object


def _resolve_psa(fitted, n_rows):
    return {"eta0": float(fitted._states[0].kernel.eta0),
            # the paper's b ~ 0.5 |D| / 1000 for the whole data (Section 5.1.4)
            "period": max(10, int(round(0.5 * n_rows / 1000)))}


MIXING_RULES = {
    PlainSGDClassifier: MixingRule(
        ("eta0",), lambda f, n: {"eta0": float(f._states[0].eta0)},
        _mix_linear(_mix_sgd_state)),
    PSAClassifier: MixingRule(("eta0", "period"), _resolve_psa,
                              _mix_linear(_mix_psa_problem)),
    SGDQNLinearSVC: MixingRule(
        ("t0", "skip"), lambda f, n: {"t0": float(f.t0_[0]), "skip": int(f.skip_)},
        _mix_linear(_mix_sgdqn_state)),
    SBMLogisticRegression: MixingRule((), None, _mix_linear(_mix_sbm_state)),
    SGDSequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(True, False)),
    ASFSequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(True, False)),
    PSASequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(False, True)),
    AveragedPerceptronSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
    PassiveAggressiveSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
    AROWSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
}
"""The mixing rule of each estimator class (subclasses use their base's)."""


def _rule_for(estimator):
    for cls in type(estimator).__mro__:
        if cls in MIXING_RULES:
            return MIXING_RULES[cls]
    raise TypeError(
        f"ParameterMixing has no mixing rule for {type(estimator).__name__}; supported: "
        + ", ".join(c.__name__ for c in MIXING_RULES) + ".")


# ---- what travels ---------------------------------------------------------------------
#: What a pass recomputes from the state (partial_fit exports it again), and the
#: taggers' vocabulary (the client keeps it; the workers' data is vectorised).
_EXPORTS = ("coef_", "intercept_", "eta_", "B_", "_model", "vocabulary_")


def _psa_windows(model):
    """``(LazyStepState, period)`` of each PSA state of ``model`` (none for other methods)."""
    if isinstance(model, PSAClassifier):
        return [(s.kernel, s.period) for s in getattr(model, "_states", ())
                if s.kernel is not None]
    if isinstance(model, PSASequenceTagger) and getattr(model, "_state", None) is not None \
            and model._state.psa is not None:
        return [(model._state.psa, model.period)]
    return []


def _slim(model, windows=True):
    """Drop, in place, what need not travel: the exported arrays, and after a
    mixing step PSA's window arrays (restarted there: ``_restart_window`` rebuilds
    them from the weights and ``t``). A third of PSA's state and the exports of
    every method. ``windows=False`` keeps the windows (a model that was not mixed)."""
    for name in _EXPORTS:
        vars(model).pop(name, None)
    for kernel, _ in (_psa_windows(model) if windows else ()):
        kernel.snaps = kernel.last = kernel.next_event = None
    return model


def _rehydrate(model, export):
    """Undo ``_slim``: the restarted PSA windows, and (``export``) the exports."""
    for kernel, period in _psa_windows(model):
        if kernel.snaps is None:
            _restart_window(kernel, period)
    if export:
        if isinstance(model, _BaseSequenceTagger):
            model._model = model._final_flat()
        elif hasattr(model, "_states"):
            model._export()
    return model


# ---- worker-side functions (they run where the partitions are) ----------------------
def _bundle(*parts):
    """One partition: ``(X, y[, sample_weight])`` (linear) or a list of pairs (bag)."""
    return parts if len(parts) > 1 else parts[0]


def _concat_rows(blocks):
    first = blocks[0]
    if len(blocks) == 1:
        return first
    if sp.issparse(first):
        return sp.vstack(blocks, format="csr")
    if hasattr(first, "iloc"):  # pandas
        import pandas as pd
        return pd.concat(blocks)
    return np.concatenate([np.asarray(b) for b in blocks])


def _linear_batch(parts):
    """A worker's partitions as one ``(X, y, sample_weight)``."""
    X = _concat_rows([pt[0] for pt in parts])
    y = np.concatenate([np.asarray(pt[1]).ravel() for pt in parts])
    sw = (np.concatenate([np.asarray(pt[2]).ravel() for pt in parts])
          if len(parts[0]) > 2 else None)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    return X, y, sw


def _tagger_batch(parts):
    pairs = [pair for part in parts for pair in part]
    return [s for s, _ in pairs], [list(lab) for _, lab in pairs]


def _n_rows(part):
    if isinstance(part, tuple):
        return int(part[0].shape[0])
    return len(part)


def _join(parts, tagger, classes, kind, vocabulary):
    """A worker's partitions joined once per fit, in the form its passes read:
    ``(X, y, sample_weight)`` for linear models; for taggers the
    ``SequenceBatch`` the tagger's ``partial_fit`` would build, vectorised with
    the shared vocabulary (so the feature dicts are read once, not every pass)."""
    if not tagger:
        return _linear_batch(parts)
    X, y = _tagger_batch(parts)
    if kind == KIND_DICTS:
        data, indices, indptr, offsets = vectorize_dicts(X, vocabulary, grow=False)
        n_features = len(vocabulary)
    else:
        data, indices, indptr, offsets, n_features = stack_arrays(X, vocabulary)
    labels = flatten_labels(y, np.diff(offsets))
    unseen = np.setdiff1d(np.unique(labels), classes)
    if unseen.size:
        raise ValueError(f"y contains labels not in classes {classes!r}: {unseen[:5]!r}")
    return SequenceBatch(data, indices, indptr, offsets, labels, n_features, kind)


def _worker_pass(model, classes, tagger, batch, slim):
    """One pass of ``model`` over a worker's joined partitions (one
    ``partial_fit``, so the worker's rows are shuffled together as one machine's
    pass would; for taggers its core, ``_fit_batch``, on the batch vectorised
    once). Returns the model (``_slim`` when it is to be mixed), the rows, and
    the seconds the pass took on the worker."""
    tic, cpu = time.perf_counter(), time.process_time()
    # (a copy: the scattered start must not change under the worker's task)
    model = _rehydrate(copy.deepcopy(model), export=False)
    with warnings.catch_warnings():
        # a worker's share is not the data the estimator's weight-scale check is about
        warnings.filterwarnings("ignore", message=".*implausibl", category=UserWarning)
        if tagger:
            model._fit_batch(batch, 1, first=False)
            n = batch.n_sequences
        else:
            X, y, sw = batch
            first = not hasattr(model, "classes_")
            model.partial_fit(X, y, classes=classes if first else None, sample_weight=sw)
            n = X.shape[0]
    return ((_slim(model) if slim else model), n, time.perf_counter() - tic,
            time.process_time() - cpu)


def _resolve_auto(model, part, classes, tagger, n_head, n_rows):
    """Fit a copy on the first ``n_head`` rows of a partition; the concrete values
    of its ``'auto'`` settings."""
    rule = _rule_for(model)
    tmp = clone(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if tagger:
            X, y = _tagger_batch([part[:n_head]])
            tmp.partial_fit(X, y, classes=classes)
        else:
            X, y, sw = _linear_batch([tuple(a[:n_head] for a in part)])
            tmp.partial_fit(X, y, classes=classes, sample_weight=sw)
    return rule.resolve(tmp, n_rows)


def _summary(part, tagger):
    """What the client needs of a partition (never the rows): its length, and for
    bags the labels and the attributes in order of first appearance."""
    if not tagger:
        return {"n": _n_rows(part)}
    sentences, labels, attrs, kind, n_features = [], set(), {}, None, None
    for sentence, labs in part:
        labels.update(labs)
        sentences.append(sentence)
    if sentences:
        kind = input_kind(sentences)
        if kind == KIND_DICTS:
            # the taggers' own reading (every pycrfsuite form, CRFsuite's
            # names), so the columns are those of a plain fit
            vectorize_dicts(sentences, attrs, grow=True)
        else:
            n_features = int(np.shape(sentences[0])[1])
    return {"n": len(part), "labels": labels, "attrs": list(attrs), "kind": kind,
            "n_features": n_features}


def _identity(part):
    return part


def _balance(place, rows, workers):
    """Partitions to move so that every worker trains on about the same rows:
    ``{partition: new worker}``. The scheduler placed the partitions where it
    computed them (all on one worker, for instance, when they are small); each
    move takes the partition of the most loaded worker that best halves the gap
    to the least loaded one, while moving it narrows that gap."""
    load = {w: 0 for w in workers}
    held = {w: [] for w in workers}
    for i, w in place.items():
        load[w] = load.get(w, 0) + rows[i]
        held.setdefault(w, []).append(i)
    moves = {}
    for _ in range(len(place)):
        hi = max(load, key=load.get)
        lo = min(load, key=load.get)
        gap = load[hi] - load[lo]
        fits = [i for i in held[hi] if rows[i] < gap]
        if not fits:
            break
        i = min(fits, key=lambda i: (abs(gap - 2 * rows[i]), i))
        held[hi].remove(i)
        held[lo].append(i)
        load[hi] -= rows[i]
        load[lo] += rows[i]
        moves[i] = lo
    return {i: w for i, w in moves.items() if w != place[i]}


def _linear_labels(part):
    return np.unique(np.asarray(part[1]).ravel())


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
        at full rank) or sequence taggers (``SGDSequenceTagger``,
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
        The class labels.
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
        (``coef_``...) and, between mixing steps, PSA's window arrays are left
        out: they are rebuilt from the state.
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
        if classes is None:
            if tagger:
                classes = np.unique(np.asarray(list(set().union(
                    *[s["labels"] for s in summaries]))))
            else:
                classes = np.unique(np.concatenate(client.gather(
                    [client.submit(_linear_labels, f, pure=False) for f in futures])))
        classes = np.unique(np.asarray(classes))

        # the workers and their partitions (in partition order)
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

        # concrete 'auto' settings, resolved on the first rows of the first partition
        model = clone(self.estimator)
        auto = [name for name in rule.auto_params if model.get_params()[name] == "auto"]
        self.resolved_params_ = {}
        first = by_worker[workers[0]][0]
        if auto:
            resolved = client.submit(
                _resolve_auto, model, futures[first], classes, tagger,
                self.n_calibration_rows, n_rows, workers=[workers[0]], pure=False).result()
            self.resolved_params_ = {k: resolved[k] for k in auto}
            model.set_params(**self.resolved_params_)
        start = None
        if tagger:
            start = model = _start_tagger(model, summaries, classes)
        elif isinstance(model, SBMLogisticRegression):
            K = 1 if classes.size == 2 else classes.size
            rank = model._rank(X.shape[1], K)
            if rank is not None:
                raise ValueError(
                    f"ParameterMixing mixes SBMLogisticRegression at full rank only (rank="
                    f"{self.estimator.rank!r} gives rank {rank} for {X.shape[1]} features): "
                    "the low-rank factors of different workers do not add up to a rank-k "
                    "bound. Pass rank=None.")

        # each worker's partitions joined once, on the worker; the partitions go
        vocabulary = getattr(model, "vocabulary_", None) if tagger else None
        kind = getattr(model, "_kind", None)
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
            [start_f] = client.scatter([_slim(model, windows=mixing)], broadcast=True, hash=False)
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
        self.classes_ = model.classes_
        self.n_iter_ = max_iter
        self.n_workers_ = len(workers)
        self.partitions_ = [list(by_worker[w]) for w in workers]
        self.rows_per_worker_ = [int(r) for r in w_rows]
        if hasattr(model, "n_features_in_"):
            self.n_features_in_ = model.n_features_in_
        return self

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
        one_column = method == "predict" or (method == "decision_function"
                                             and len(est.classes_) == 2)
        dtype = est.classes_.dtype if method == "predict" else np.float64
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


def _linear_counts(est, part):
    X, y = part[0], np.asarray(part[1]).ravel()
    return float(np.sum(est.predict(X) == y)), float(y.size)


def _tagger_counts(est, part):
    X, y = _tagger_batch([list(part)])
    pred = est.predict(X)
    hits = sum(int(a == b) for p, t in zip(pred, y) for a, b in zip(p, t))
    return hits, sum(len(t) for t in y)


# ---- starts built on the client (no data needed) ------------------------------------
def _start_tagger(model, summaries, classes):
    """A tagger with zero weights over the shared vocabulary (the attributes in
    order of first appearance over the partitions), as its ``fit`` would set up."""
    kinds = {s["kind"] for s in summaries if s["kind"] is not None}
    if len(kinds) != 1:
        raise ValueError("the bag mixes sentences of feature dicts and of arrays.")
    kind = kinds.pop()
    model._validate_params()
    model._more_validate_params()
    model.classes_ = model._check_labels(classes)
    model._kind = kind
    if kind == KIND_DICTS:
        vocabulary = {}
        for s in summaries:
            for a in s["attrs"]:
                vocabulary.setdefault(a, len(vocabulary))
        model.vocabulary_ = vocabulary
        n_attributes = len(vocabulary)
    else:
        n_attributes = next(s["n_features"] for s in summaries if s["n_features"] is not None)
        model.n_features_in_ = n_attributes
    model._new_state(n_attributes, check_random_state(model.random_state))
    if model.eta0 == "auto":  # (resolved before unless the caller set it)
        raise ValueError("eta0='auto' must be resolved before the start is built.")
    if model.eta0 is not None:   # (the perceptron-like trainers take no step size)
        model.eta0_ = float(model.eta0)
        check_eta0(model, model.eta0_)   # (the workers run the tagger's core)
    model.t_ = 0
    model.n_iter_ = 0
    model._model = model._final_flat()
    return model
