"""Viterbi-based online CRF trainers: CRFsuite's ``ap``, ``pa`` and ``arow``.

Each visits the sequences one at a time (shuffled each pass), decodes the
current model by Viterbi (``CRFContext.viterbi``) and, when the best path
``v`` differs from the true labels ``y`` (``d`` = number of differing
tokens > 0), steps along the sparse difference of the feature vectors::

    delta = F(x, y) - F(x, v)

``F`` counts the state features ``(attribute, label)`` with the attribute's
value, the bias ``(label)`` (with ``fit_intercept``) and the transitions
``(label_prev, label)``, in ``CRFContext``'s flat layout. ``delta`` is
collected into a dense scratch vector with a list of the touched weights
(cleared after each update), so an update costs O(non-zeros of the
sequence), not O(n_weights).

* Averaged perceptron (Collins 2002): ``w += delta``.
* Passive-aggressive (Crammer et al., JMLR 2006, Sec. 8 for structured
  outputs): ``w += tau delta`` with the cost ``l = score(v) - score(y) +
  sqrt(d)`` (``error_sensitive``) or ``+ 1``, and ``tau = l / ||delta||^2``
  (PA), ``min(c, l / ||delta||^2)`` (PA-I) or ``l / (||delta||^2 + 1 /
  (2c))`` (PA-II).
* AROW (Crammer, Kulesza and Dredze, NIPS 2009) with a diagonal covariance
  ``Sigma``: cost ``l = score(v) - score(y) + d``, ``beta = 1 / (gamma +
  sum_k Sigma_k delta_k^2)``, ``w_k += l beta Sigma_k delta_k`` and
  ``1 / Sigma_k += delta_k^2 / gamma``. No averaging.

These are the semantics of CRFsuite's ``train_averaged_perceptron.c``,
``train_passive_aggressive.c`` and ``train_arow.c`` (read, not copied),
including the averaging: the model returned is the mean of the initial
(zero) weights and the weights after every sequence visited, kept lazily in
``ScaledWeights``' running sum (``u -= C * step``, ``C += 1`` per sequence;
the state's ``n_iterates`` starts at 1 for the initial weights). It equals
CRFsuite's ``w - ws / c``. The stopping test after each pass is CRFsuite's:
AP stops when the mean ratio of wrong labels is below ``epsilon``, PA when
the mean cost is below ``epsilon``, AROW when it is at most ``epsilon``.

CRFsuite only has the state features and transitions seen in the training
data (unless ``feature.possible_states`` / ``possible_transitions``), so its
Viterbi-path update skips the ``(attribute, wrong label)`` pairs never
observed: ``exists`` (``sequence/_feature_set.py``) marks the weights that
exist, and ``collect`` ignores the others, which stay at zero.
"""
from dataclasses import dataclass, field

import numpy as np
from libc.math cimport isfinite, sqrt
from libc.stdlib cimport malloc, calloc, free

from ._crf_infer cimport CRFContext, context_for
from ._dataset cimport SequenceData
from ._numeric cimport now_seconds
from ._weights cimport ScaledWeights

cpdef enum OnlineMethod:
    AP = 0
    PA = 1
    AROW = 2


@dataclass
class OnlineOptions:
    """An online trainer's settings (module docstring).

    Attributes
    ----------
    method : int
        ``AP``, ``PA`` or ``AROW``.
    pa_type : int
        0 (PA), 1 (PA-I) or 2 (PA-II).
    c : float
        PA's aggressiveness.
    error_sensitive : bool
        PA's cost adds ``sqrt(d)`` (else 1).
    averaging : bool
        Keep the running sum of the iterates (AP always, PA optionally).
    gamma : float
        AROW's trade-off.
    epsilon : float
        The stopping threshold on the pass's mean loss.
    shuffle, fit_intercept : bool
    """

    method: int
    pa_type: int = 1
    c: float = 1.0
    error_sensitive: bool = True
    averaging: bool = True
    gamma: float = 1.0
    epsilon: float = 0.0
    shuffle: bool = True
    fit_intercept: bool = True


@dataclass
class OnlineResult:
    """What ``online_epochs`` reports.

    Attributes
    ----------
    epochs : int
        Passes completed.
    diverged : bool
        The weights or the token scores overflowed.
    stopped : bool
        The ``epsilon`` test ended the passes.
    losses : list of float
        The loss of each pass summed over the sequences (CRFsuite's "Loss":
        AP the ratio of wrong labels, PA and AROW the cost).
    seconds : list of float
        Wall time of each pass.
    """

    epochs: int
    diverged: bool = False
    stopped: bool = False
    losses: list = field(default_factory=list)
    seconds: list = field(default_factory=list)


cdef struct Delta:
    # F(x, y) - F(x, v): a dense scratch vector and the list of its touched entries
    double* val
    unsigned char* used
    Py_ssize_t* active
    Py_ssize_t n_active
    const unsigned char* exists       # the weights that exist (NULL: all)


cdef inline void collect(Delta* dl, Py_ssize_t k, double value) noexcept nogil:
    if dl.exists != NULL and not dl.exists[k]:
        return                           # a feature CRFsuite would not have
    if not dl.used[k]:
        dl.used[k] = 1
        dl.active[dl.n_active] = k
        dl.n_active += 1
    dl.val[k] += value


cdef void collect_path(Delta* dl, SequenceData ds, Py_ssize_t s, const int* path,
                       CRFContext ctx, double sign, bint fit_intercept) noexcept nogil:
    """``sign * F(x_s, path)`` into ``dl``: state features, bias, transitions."""
    cdef int H = ctx.n_states, t
    cdef long long r, k, first = ds.offsets[s]
    cdef Py_ssize_t j, n_attr = ctx.n_attributes
    for t in range(ctx.T):
        r = first + t
        for k in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[k]
            if j < n_attr:
                collect(dl, j * H + path[t], sign * ds.data[k])
        if fit_intercept:
            collect(dl, ctx.bias_offset + path[t], sign)
        if t > 0:
            collect(dl, ctx.trans_offset + path[t - 1] * H + path[t], sign)


cdef inline void load_transition_scores(CRFContext ctx, ScaledWeights w) noexcept nogil:
    """The transition scores Viterbi reads (``load_transitions`` also takes
    their exponentials, which only forward-backward needs)."""
    cdef Py_ssize_t i, H = ctx.n_states
    for i in range(H * H):
        ctx.trans[i] = w.scale * w.v[ctx.trans_offset + i]


def online_epochs(SequenceData ds, state, options, *, int n_epochs=1, cov=None,
                  exists=None):
    """Run up to ``n_epochs`` passes of an online trainer (module docstring).

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : CRFState
        Updated in place (weights, running sum, counters). Averaging needs
        ``state.avg``; its ``n_iterates`` counts the initial weights.
    options : OnlineOptions
    n_epochs : int
    cov : ndarray like ``state.coef``, or None
        AROW's diagonal covariance, updated in place.
    exists : uint8 ndarray like ``state.coef``, or None
        The weights that exist (CRFsuite's feature set); None: all.

    Returns
    -------
    result : OnlineResult
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    cdef int method = options.method
    cdef bint averaging = options.averaging and method != AROW
    if averaging and state.avg is None:
        raise ValueError("averaging needs the running sum (state.avg)")
    cdef ScaledWeights w = state.weights(averaged=averaging)
    if w.scale != 1.0:
        raise ValueError("the online trainers need unscaled weights")
    cdef CRFContext ctx = context_for(w, 1, ds.max_len)
    if ds.n_features > ctx.n_attributes:
        raise ValueError("the data have more attributes than the weights")
    cdef Py_ssize_t n_weights = w.n_features * w.n_outputs
    cdef double[::1] cov_arr
    cdef double* S = NULL
    if method == AROW:
        if cov is None or cov.shape[0] != n_weights:
            raise ValueError("AROW needs a covariance vector like the weights")
        cov_arr = cov
        S = &cov_arr[0]
    # the most entries one update can touch: two paths' features
    cdef Py_ssize_t max_active = 0, s
    offsets = np.asarray(ds.offsets)
    nnz = np.diff(np.asarray(ds.indptr)[offsets])
    if nnz.size:
        max_active = int(2 * (nnz.max() + 2 * np.diff(offsets).max()))
    cdef Delta dl
    cdef const unsigned char[::1] exists_arr
    dl.n_active = 0
    dl.exists = NULL
    if exists is not None:
        if exists.shape[0] != n_weights:
            raise ValueError("exists must have one entry per weight")
        exists_arr = exists
        dl.exists = &exists_arr[0]
    dl.val = <double*>calloc(n_weights, sizeof(double))
    dl.used = <unsigned char*>calloc(n_weights, sizeof(unsigned char))
    dl.active = <Py_ssize_t*>malloc((max_active + 1) * sizeof(Py_ssize_t))
    cdef const int* lab = <const int*>&ds.labels[0] if ds.n_tokens else NULL
    cdef int pa_type = options.pa_type, T, t, d
    cdef double c = options.c, gamma = options.gamma, epsilon = options.epsilon
    cdef bint error_sensitive = options.error_sensitive, shuffle = options.shuffle
    cdef bint fit_intercept = options.fit_intercept
    cdef long long tcount = state.t, passes = state.passes
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef int _epoch, epochs_run = 0
    cdef Py_ssize_t i, k, q
    cdef double sv, sc, cost, norm2, tau, step, loss, frac, dk, C, t_start
    cdef const int* y
    cdef bint diverged = False, stopped = False, trans_stale
    cdef double* v = w.v
    cdef double* u = w.u
    result = OnlineResult(epochs=0)
    if dl.val == NULL or dl.used == NULL or dl.active == NULL:
        free(dl.val)
        free(dl.used)
        free(dl.active)
        raise MemoryError()
    try:
        with nogil:
            for _epoch in range(n_epochs):
                t_start = now_seconds()
                if shuffle:
                    ds.shuffle(&rng)
                loss = 0.0
                trans_stale = True
                for i in range(ds.n_sequences):
                    s = ds.order[i]
                    if trans_stale:
                        load_transition_scores(ctx, w)
                        trans_stale = False
                    ctx.load_emissions(ds, s, w)
                    sv = ctx.viterbi()
                    if not isfinite(sv):
                        # overflowing token scores: the best path is arbitrary
                        diverged = True
                        break
                    y = lab + ds.offsets[s]
                    T = ctx.T
                    d = 0
                    for t in range(T):
                        if ctx.path[t] != y[t]:
                            d += 1
                    if d > 0:
                        dl.n_active = 0
                        collect_path(&dl, ds, s, y, ctx, 1.0, fit_intercept)
                        collect_path(&dl, ds, s, ctx.path, ctx, -1.0, fit_intercept)
                        sc = ctx.path_score(y)
                        C = w.avg_coef
                        if method == AP:
                            tau = 1.0
                            loss += d / <double>T
                        elif method == PA:
                            cost = sv - sc + (sqrt(<double>d) if error_sensitive else 1.0)
                            norm2 = 0.0
                            for q in range(dl.n_active):
                                dk = dl.val[dl.active[q]]
                                norm2 += dk * dk
                            if not isfinite(norm2):
                                diverged = True      # ||delta||^2 overflowed: tau would be 0
                                break
                            if pa_type == 0:
                                tau = cost / norm2 if norm2 > 0.0 else 0.0
                            elif pa_type == 1:
                                tau = cost / norm2 if norm2 > 0.0 else c
                                if tau > c:
                                    tau = c
                            else:
                                tau = cost / (norm2 + 0.5 / c)
                            loss += cost
                        else:
                            cost = sv - sc + d
                            frac = gamma
                            for q in range(dl.n_active):
                                k = dl.active[q]
                                frac += dl.val[k] * dl.val[k] * S[k]
                            tau = cost / frac
                            loss += cost
                        for q in range(dl.n_active):
                            k = dl.active[q]
                            dk = dl.val[k]
                            if method == AROW:
                                v[k] += tau * S[k] * dk
                                S[k] = 1.0 / (1.0 / S[k] + dk * dk / gamma)
                            else:
                                step = tau * dk
                                v[k] += step
                                if averaging:
                                    u[k] -= C * step
                            dl.val[k] = 0.0
                            dl.used[k] = 0
                        trans_stale = True
                    if averaging:
                        w.count_iterate(1.0)
                    tcount += 1
                if diverged:
                    break
                epochs_run += 1
                passes += 1
                with gil:
                    result.seconds.append(now_seconds() - t_start)
                    result.losses.append(loss)
                if not w.is_finite():
                    diverged = True
                    break
                if ((method == AROW and loss / ds.n_sequences <= epsilon)
                        or (method != AROW and loss / ds.n_sequences < epsilon)):
                    stopped = True
                    break
            w.fold()
    finally:
        free(dl.val)
        free(dl.used)
        free(dl.active)
    state.t, state.passes, state.seed = tcount, passes, rng
    if averaging:
        state.n_iterates = w.n_iterates
    result.epochs, result.diverged, result.stopped = epochs_run, diverged, stopped
    return result
