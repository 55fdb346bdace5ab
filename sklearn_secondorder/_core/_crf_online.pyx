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
CRFsuite's ``w - ws / c``.

One stopping test serves every method: after a pass, stop when its mean
loss is below ``epsilon``, or when the pass changed nothing and nothing is
averaged (every later pass would repeat it exactly). That is CRFsuite's
``<`` test for AP and PA, and at ``epsilon = 0`` its ``<=`` test for AROW
(a zero-cost pass makes no update); the two differ only at a mean cost
exactly equal to a positive ``epsilon``.

CRFsuite only has the state features and transitions seen in the training
data (unless ``feature.possible_states`` / ``possible_transitions``), so its
Viterbi-path update skips the ``(attribute, wrong label)`` pairs never
observed: ``exists`` (``sequence/_feature_set.py``) marks the weights that
exist, and ``collect`` ignores the others, which stay at zero.

Layout, as CRFsuite keeps one file per trainer over one encoder: the pass
(``run_pass``: shuffle, Viterbi, the difference vector, the loss) is shared,
and each method is one small step function (``ap_step``, ``pa0_step``,
``pa1_step``, ``pa2_step``, ``arow_step``) picked once per call by
``pick_step``.
"""
from dataclasses import dataclass, field

import numpy as np
from libc.math cimport isfinite, sqrt, NAN

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
    """

    method: int
    pa_type: int = 1
    c: float = 1.0
    error_sensitive: bool = True
    averaging: bool = True
    gamma: float = 1.0
    epsilon: float = 0.0


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
        The stopping test ended the passes.
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


cdef struct Step:
    # what a method's step reads and writes
    double* v                         # the weights
    double* u                         # the running sum (NULL: no averaging)
    double* S                         # AROW's diagonal covariance
    double avg_coef                   # C in  sum_of_iterates = u + C * v, this sequence
    double c                          # PA's aggressiveness
    double gamma                      # AROW's trade-off
    bint error_sensitive              # PA's cost adds sqrt(d) (else 1)


# A method's update along ``delta`` for one wrongly decoded sequence; returns
# the sequence's loss, NAN when the update overflowed.
ctypedef double (*step_fn)(Step* st, Delta* dl, double margin, int d,
                           int T) noexcept nogil


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


cdef inline void clear(Delta* dl) noexcept nogil:
    cdef Py_ssize_t q, k
    for q in range(dl.n_active):
        k = dl.active[q]
        dl.val[k] = 0.0
        dl.used[k] = 0
    dl.n_active = 0


cdef inline void add_scaled(Step* st, Delta* dl, double tau) noexcept nogil:
    """``w += tau * delta``, and the running sum's share when averaging."""
    cdef Py_ssize_t q, k
    cdef double step
    for q in range(dl.n_active):
        k = dl.active[q]
        step = tau * dl.val[k]
        st.v[k] += step
        if st.u != NULL:
            st.u[k] -= st.avg_coef * step


cdef inline double sq_norm(Delta* dl) noexcept nogil:
    cdef Py_ssize_t q
    cdef double dk, norm2 = 0.0
    for q in range(dl.n_active):
        dk = dl.val[dl.active[q]]
        norm2 += dk * dk
    return norm2


# ---- one step function per method (module docstring) -------------------------
cdef double ap_step(Step* st, Delta* dl, double margin, int d, int T) noexcept nogil:
    """Averaged perceptron: ``w += delta``; the loss is the ratio of wrong labels."""
    add_scaled(st, dl, 1.0)
    return d / <double>T


cdef inline double pa_cost(Step* st, double margin, int d) noexcept nogil:
    return margin + (sqrt(<double>d) if st.error_sensitive else 1.0)


cdef double pa0_step(Step* st, Delta* dl, double margin, int d, int T) noexcept nogil:
    """PA: ``tau = l / ||delta||^2``."""
    cdef double cost = pa_cost(st, margin, d), norm2 = sq_norm(dl)
    if not isfinite(norm2):
        return NAN                       # ||delta||^2 overflowed: tau would be 0
    add_scaled(st, dl, cost / norm2 if norm2 > 0.0 else 0.0)
    return cost


cdef double pa1_step(Step* st, Delta* dl, double margin, int d, int T) noexcept nogil:
    """PA-I: ``tau = min(c, l / ||delta||^2)``."""
    cdef double cost = pa_cost(st, margin, d), norm2 = sq_norm(dl)
    cdef double tau
    if not isfinite(norm2):
        return NAN
    tau = cost / norm2 if norm2 > 0.0 else st.c
    if tau > st.c:
        tau = st.c
    add_scaled(st, dl, tau)
    return cost


cdef double pa2_step(Step* st, Delta* dl, double margin, int d, int T) noexcept nogil:
    """PA-II: ``tau = l / (||delta||^2 + 1 / (2 c))``."""
    cdef double cost = pa_cost(st, margin, d), norm2 = sq_norm(dl)
    if not isfinite(norm2):
        return NAN
    add_scaled(st, dl, cost / (norm2 + 0.5 / st.c))
    return cost


cdef double arow_step(Step* st, Delta* dl, double margin, int d, int T) noexcept nogil:
    """AROW: ``w_k += l beta Sigma_k delta_k``, ``1 / Sigma_k += delta_k^2 / gamma``."""
    cdef double cost = margin + d, frac = st.gamma, tau, dk
    cdef Py_ssize_t q, k
    for q in range(dl.n_active):
        k = dl.active[q]
        frac += dl.val[k] * dl.val[k] * st.S[k]
    tau = cost / frac
    for q in range(dl.n_active):
        k = dl.active[q]
        dk = dl.val[k]
        st.v[k] += tau * st.S[k] * dk
        st.S[k] = 1.0 / (1.0 / st.S[k] + dk * dk / st.gamma)
    return cost


cdef step_fn pick_step(int method, int pa_type):
    """The method's step, chosen once per call (PA's by ``pa_type``)."""
    if method == AP:
        return ap_step
    if method == AROW:
        return arow_step
    if pa_type == 0:
        return pa0_step
    return pa1_step if pa_type == 1 else pa2_step


# ---- the shared pass ---------------------------------------------------------------
cdef inline void load_transition_scores(CRFContext ctx, ScaledWeights w) noexcept nogil:
    """The transition scores Viterbi reads (``load_transitions`` also takes
    their exponentials, which only forward-backward needs)."""
    cdef Py_ssize_t i, H = ctx.n_states
    for i in range(H * H):
        ctx.trans[i] = w.scale * w.v[ctx.trans_offset + i]


cdef bint run_pass(SequenceData ds, CRFContext ctx, ScaledWeights w, Delta* dl,
                   Step* st, step_fn step, bint fit_intercept, bint averaging,
                   double* loss, Py_ssize_t* n_updates, long long* n_visited) noexcept nogil:
    """One pass in ``ds.order``: decode each sequence, step where it is wrong.

    Returns True when the token scores or an update overflowed.
    """
    cdef const int* lab = <const int*>&ds.labels[0]
    cdef const int* y
    cdef Py_ssize_t i, s
    cdef int t, d
    cdef double sv, seq_loss
    cdef bint trans_stale = True
    for i in range(ds.n_sequences):
        s = ds.order[i]
        if trans_stale:
            load_transition_scores(ctx, w)
            trans_stale = False
        ctx.load_emissions(ds, s, w)
        sv = ctx.viterbi()
        if not isfinite(sv):
            return True                  # overflowing token scores: the best path is arbitrary
        y = lab + ds.offsets[s]
        d = 0
        for t in range(ctx.T):
            if ctx.path[t] != y[t]:
                d += 1
        if d > 0:
            collect_path(dl, ds, s, y, ctx, 1.0, fit_intercept)
            collect_path(dl, ds, s, ctx.path, ctx, -1.0, fit_intercept)
            st.avg_coef = w.avg_coef
            seq_loss = step(st, dl, sv - ctx.path_score(y), d, ctx.T)
            clear(dl)
            if seq_loss != seq_loss:
                return True
            loss[0] += seq_loss
            n_updates[0] += 1
            trans_stale = True
        if averaging:
            w.count_iterate(1.0)
        n_visited[0] += 1
    return False


cdef class _Scratch:
    """The difference vector's buffers, owned by NumPy arrays made before the
    nogil section (so nothing is freed by hand)."""
    cdef double[::1] val
    cdef unsigned char[::1] used
    cdef Py_ssize_t[::1] active
    cdef const unsigned char[::1] exists

    def __init__(self, SequenceData ds, Py_ssize_t n_weights, exists):
        # the most entries one update can touch: two paths' features
        cdef Py_ssize_t max_active = 0
        offsets = np.asarray(ds.offsets)
        nnz = np.diff(np.asarray(ds.indptr)[offsets])
        if nnz.size:
            max_active = int(2 * (nnz.max() + 2 * np.diff(offsets).max()))
        self.val = np.zeros(n_weights)
        self.used = np.zeros(n_weights, dtype=np.uint8)
        self.active = np.empty(max_active + 1, dtype=np.intp)
        if exists is not None:
            if exists.shape[0] != n_weights:
                raise ValueError("exists must have one entry per weight")
            self.exists = exists

    cdef Delta delta(self):
        cdef Delta dl
        dl.val = &self.val[0]
        dl.used = &self.used[0]
        dl.active = &self.active[0]
        dl.n_active = 0
        dl.exists = &self.exists[0] if self.exists is not None else NULL
        return dl


cdef Step make_step(options, ScaledWeights w, bint averaging, cov, Py_ssize_t n_weights):
    cdef Step st
    cdef double[::1] cov_arr
    st.v = w.v
    st.u = w.u if averaging else NULL
    st.S = NULL
    st.avg_coef = 0.0
    st.c = options.c
    st.gamma = options.gamma
    st.error_sensitive = options.error_sensitive
    if options.method == AROW:
        if cov is None or cov.shape[0] != n_weights:
            raise ValueError("AROW needs a covariance vector like the weights")
        cov_arr = cov
        st.S = &cov_arr[0]
    return st


def online_epochs(SequenceData ds, state, options, *, int n_epochs=1, bint shuffle=True,
                  bint fit_intercept=True, cov=None, exists=None):
    """Run up to ``n_epochs`` passes of an online trainer (module docstring).

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : CRFState
        Updated in place (weights, running sum, counters). Averaging needs
        ``state.avg``; its ``n_iterates`` counts the initial weights.
    options : OnlineOptions
    n_epochs : int
    shuffle : bool
        Shuffle the sequences before each pass.
    fit_intercept : bool
        Train the bias row.
    cov : ndarray like ``state.coef``, or None
        AROW's diagonal covariance, updated in place (it must stay alive for
        the call: the kernel holds a pointer into it).
    exists : uint8 ndarray like ``state.coef``, or None
        The weights that exist (CRFsuite's feature set); None: all.

    Returns
    -------
    result : OnlineResult
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    cdef bint averaging = options.averaging and options.method != AROW
    if averaging and state.avg is None:
        raise ValueError("averaging needs the running sum (state.avg)")
    cdef ScaledWeights w = state.weights(averaged=averaging)
    if w.scale != 1.0:
        raise ValueError("the online trainers need unscaled weights")
    cdef CRFContext ctx = context_for(w, 1, ds.max_len)
    if ds.n_features > ctx.n_attributes:
        raise ValueError("the data have more attributes than the weights")
    cdef Py_ssize_t n_weights = w.n_features * w.n_outputs, n_updates
    cdef Step st = make_step(options, w, averaging, cov, n_weights)
    cdef step_fn step = pick_step(options.method, options.pa_type)
    cdef _Scratch scratch = _Scratch(ds, n_weights, exists)
    cdef Delta dl = scratch.delta()
    cdef double epsilon = options.epsilon, loss, t_start
    cdef bint diverged = False, stopped = False
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef long long tcount = state.t
    cdef int _epoch, epochs_run = 0
    result = OnlineResult(epochs=0)
    with nogil:
        for _epoch in range(n_epochs):
            t_start = now_seconds()
            if shuffle:
                ds.shuffle(&rng)
            loss = 0.0
            n_updates = 0
            if ds.n_tokens:
                diverged = run_pass(ds, ctx, w, &dl, &st, step, fit_intercept, averaging,
                                    &loss, &n_updates, &tcount)
            if diverged:
                break
            epochs_run += 1
            with gil:
                result.seconds.append(now_seconds() - t_start)
                result.losses.append(loss)
            if not w.is_finite():
                diverged = True
                break
            # one test for every method (module docstring)
            if loss / ds.n_sequences < epsilon or (n_updates == 0 and not averaging):
                stopped = True
                break
        w.fold()
    state.t, state.passes, state.seed = tcount, state.passes + epochs_run, rng
    if averaging:
        state.n_iterates = w.n_iterates
    result.epochs, result.diverged, result.stopped = epochs_run, diverged, stopped
    return result
