"""SGD-QN kernel: the corrected algorithm of Bordes, Bottou & Gallinari.

Reference: A. Bordes, L. Bottou, P. Gallinari, "SGD-QN: Careful Quasi-Newton
Stochastic Gradient Descent", JMLR 10 (2009), Section 5, Figure 2, with the
2010 erratum ("SGDQN is less careful than expected", as implemented in the
authors' libsgdqn). The diagonal rescaling ``B`` *contains* the 1/t decay.

State of one binary problem with ``d`` features (``lam`` = alpha), held by
:class:`SGDQNState`::

    w[0:d], b         weights and intercept
    B[0:d+1]          diagonal rescaling; B[d] belongs to the intercept
    invB[0:d+1]       1 / B, accumulated harmonically; starts at lam * t0
    v[0:d+1]          weights remembered before the last regularization step
    count, update_b   skip countdown and the "re-estimate B" flag

One example ``(x, y, s)`` (``p = w.x + b``, ``l'`` = d loss / d p), in
:func:`_epochs_nogil`::

    g = s * l'(p, y)                               # at the pre-step weights
    if update_b:                                   # the example after a skip step
        gv = s * l'(v.x + v_b, y)
        r_i = lam + x_i (g - gv) / (w_i - v_i)     # where w_i != v_i, else lam
        r_b = (g - gv) / (b - v_b)                 # intercept: no L2 term
        r = clip(r, lam, r_max lam)                # r_max = 100 (libsgdqn's cmax)
        invB += skip * r;  B = 1 / invB            # 1/B_i += skip r_i (erratum)
    if --count <= 0:                               # every `skip` examples
        v = (w, b)
        w_i *= 1 - skip lam B_i                    # guarded: see _shrink_factor
        count = skip;  update_b = True
    w -= g * B o x   (non-zeros of x only);   b -= g * B_d

Zero-weight rows are skipped and do not advance the counters. The loss step
touches only the example's non-zeros; the O(d) work (copy of ``v``, dense
regularization, re-estimate of ``B``) happens once every ``skip`` examples.
"""
from dataclasses import dataclass

import numpy as np
from libc.math cimport exp, pow, isfinite
from libc.string cimport memcpy

from ._dataset cimport RowDataset
from ._numeric cimport all_finite, clip_dloss
from ._losses cimport Loss

from ._dataset import PassCounters

# Below this value the linearized shrink 1 - skip lam B_i is replaced by the
# product of `skip` exact shrinks (1 - lam B_i)^skip, or by exp(-skip lam B_i)
# when even one shrink would be negative (lam B_i >= 1, i.e. t0 < 1).
cdef double SHRINK_GUARD = 0.8
# Lower clip of the per-coordinate curvature r_i, in units of lam (the L2
# term's own curvature); the upper clip is the option r_max.
cdef double R_MIN = 1.0


@dataclass(eq=False)
class SGDQNState(PassCounters):
    """State of one binary SGD-QN problem, continued across calls.

    Create it with :meth:`zeros`, then fix ``t0`` and ``skip`` with
    :meth:`start` before the first call to :func:`sgdqn_epochs`, which
    updates it in place. It pickles with the estimator that holds it.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
        Weights ``w``.
    intercept : ndarray of shape (1,)
        Intercept ``b``.
    B : ndarray of shape (n_features + 1,)
        Diagonal rescaling; the last entry belongs to the intercept.
    invB : ndarray of shape (n_features + 1,)
        ``1 / B``, accumulated harmonically (the erratum's update) so that
        ``B`` keeps the ``1 / (alpha (t0 + t))`` decay of first-order SGD.
    v : ndarray of shape (n_features + 1,)
        Weights and intercept (last) remembered before the last skip step:
        the other end of the secant that re-estimates ``B``.
    t, seed : int
        As in ``PassCounters`` (keywords only).
    count : int
        Examples left before the next skip step.
    update_b : bool
        Whether the next example re-estimates ``B``.
    t0 : float or None
        ``B`` started at ``1 / (alpha t0)``; None until :meth:`start`.
    skip : int or None
        Examples between two skip steps; None until :meth:`start`.
    """

    coef: object
    intercept: object
    B: object
    invB: object
    v: object
    count: int = 0
    update_b: bool = False
    t0: object = None
    skip: object = None

    @classmethod
    def zeros(cls, n_features, seed):
        """A state with zero weights for ``n_features`` features, not started.

        Parameters
        ----------
        n_features : int
        seed : int
            Starting state of the shuffling generator.

        Returns
        -------
        state : SGDQNState
        """
        d = n_features
        return cls(coef=np.zeros(d), intercept=np.zeros(1), B=np.ones(d + 1),
                   invB=np.ones(d + 1), v=np.zeros(d + 1), seed=seed)

    @property
    def started(self):
        """Whether :meth:`start` has fixed ``t0`` and ``skip``."""
        return self.skip is not None

    def start(self, t0, lam, skip):
        """Restart from zero weights with ``B = 1 / (lam t0)``.

        ``t`` and ``seed`` are kept: the ``t0`` selection starts each
        candidate from the problem's seed without consuming it.

        Parameters
        ----------
        t0 : float
        lam : float
            L2 strength (the paper's lambda).
        skip : int
            Examples between two skip steps.
        """
        self.coef[:] = 0.0
        self.intercept[:] = 0.0
        self.v[:] = 0.0
        self.invB[:] = lam * t0
        self.B[:] = 1.0 / (lam * t0)
        self.t0 = t0
        self.skip = skip
        self.count = skip
        self.update_b = False


@dataclass(frozen=True)
class SGDQNOptions:
    """The constants of an :func:`sgdqn_epochs` call.

    Parameters
    ----------
    lam : float
        L2 strength (the paper's lambda; scikit-learn's ``alpha``).
    r_max : float, default=100.0
        Upper clip of the curvature estimates ``r_i``, in units of ``lam``
        (libsgdqn's ``cmax``; the lower clip is ``lam``).
    """

    lam: float
    r_max: float = 100.0

    def __post_init__(self):
        if not self.r_max >= R_MIN:
            raise ValueError("r_max must be >= 1")


@dataclass(frozen=True)
class SGDQNResult:
    """What one call to :func:`sgdqn_epochs` did.

    Attributes
    ----------
    t : int
        Examples processed so far, this call included.
    seed : int
        Shuffling state after the call.
    count : int
        Examples left before the next skip step.
    update_b : bool
        Whether the next example re-estimates ``B``.
    epochs : int
        Passes made (fewer than asked when the weights diverged).
    diverged : bool
        Whether the weights were non-finite after the last pass made.
    """

    t: int
    seed: int
    count: int
    update_b: bool
    epochs: int
    diverged: bool


cdef struct Problem:
    # Raw pointers into an SGDQNState's arrays and the constants of the
    # options, so the nogil helpers take one argument instead of a dozen.
    double* w
    double* b
    double* B
    double* invB
    double* v
    Py_ssize_t d
    double lam
    double dskip
    double rlo
    double rhi
    long long skip
    bint fit_intercept
    bint shuffle


cdef struct Progress:
    # The counters that continue across calls, and what the call did.
    long long t
    long long count
    bint update_b
    unsigned int rng
    int epochs
    bint diverged


cdef inline double _shrink_factor(double lam_b, double skip) noexcept nogil:
    """The factor of one skip-step regularization, never negative."""
    cdef double f = 1.0 - skip * lam_b
    if f >= SHRINK_GUARD:
        return f
    if lam_b < 1.0:
        return pow(1.0 - lam_b, skip)
    return exp(-skip * lam_b)


cdef inline double _clip_r(double r, double lo, double hi) noexcept nogil:
    if r < lo:
        return lo
    if r > hi:
        return hi
    return r


cdef inline double _margin(const double* w, double b, const double* x, const int* ind,
                           int nnz) noexcept nogil:
    """``b + w.x`` over the non-zeros of ``x``, summed from ``b`` in index order
    (the order fixes the rounding, hence the fitted bits)."""
    cdef double p = b
    cdef int k
    for k in range(nnz):
        p += w[ind[k]] * x[k]
    return p


cdef inline void _reestimate_B(const Problem* q, const double* x, const int* ind, int nnz,
                               double dg) noexcept nogil:
    """``1/B_i += skip r_i`` with ``r_i`` the clipped secant curvature.

    ``dg`` is the change of the example's loss gradient between ``v`` and
    ``w``. Only the example's non-zeros (and the intercept) see a secant:
    elsewhere the full gradient's change is the L2 term's, so ``r_i = lam``.
    """
    cdef double* w = q.w
    cdef double* iB = q.invB
    cdef double* vp = q.v
    cdef double lam = q.lam, dskip = q.dskip, rlo = q.rlo, rhi = q.rhi
    cdef Py_ssize_t d = q.d, j
    cdef double dw, r
    cdef int k
    if dg != 0.0:
        for k in range(nnz):
            j = ind[k]
            dw = w[j] - vp[j]
            if dw != 0.0:
                r = _clip_r(lam + dg * x[k] / dw, rlo, rhi)
                iB[j] += dskip * (r - lam)
        if q.fit_intercept:
            dw = q.b[0] - vp[d]
            if dw != 0.0:
                r = _clip_r(dg / dw, rlo, rhi)
                iB[d] += dskip * (r - lam)
    # every r_i holds lam (the L2 term's curvature): the loop above added only
    # the secant's excess over it, on the example's non-zeros
    for j in range(d + 1):
        iB[j] += dskip * lam
        q.B[j] = 1.0 / iB[j]


cdef inline void _skip_step(const Problem* q) noexcept nogil:
    """Remember ``v = (w, b)``, then apply ``skip`` steps of L2 shrink at once."""
    cdef double* w = q.w
    cdef double* Bp = q.B
    cdef double lam = q.lam, dskip = q.dskip
    cdef Py_ssize_t d = q.d, j
    if d > 0:
        memcpy(q.v, w, d * sizeof(double))
    q.v[d] = q.b[0]
    for j in range(d):
        w[j] *= _shrink_factor(lam * Bp[j], dskip)


cdef void _epochs_nogil(RowDataset ds, Loss loss, const Problem* q, Progress* pr,
                        int n_epochs) noexcept nogil:
    """The SGD-QN passes: one loss step per example, the O(d) work every ``skip``.

    Stops after a pass that leaves non-finite weights (``pr.diverged``).
    """
    cdef double* w = q.w
    cdef double* b = q.b
    cdef double* Bp = q.B
    cdef double* vp = q.v
    cdef Py_ssize_t d = q.d, i, j
    cdef bint fit_intercept = q.fit_intercept
    cdef long long t = pr.t, count = pr.count
    cdef bint update_b = pr.update_b
    cdef unsigned int rng = pr.rng
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k, _epoch
    cdef double y, sw, p, g, gv
    for _epoch in range(n_epochs):
        if q.shuffle:
            ds.shuffle(&rng)
        for i in range(ds.n_samples):
            ds.row(i, &x, &ind, &nnz, &y, &sw)
            if sw == 0.0:
                continue
            # written out rather than _margin(w, ...): this is the hottest loop
            p = b[0]
            for k in range(nnz):
                p += w[ind[k]] * x[k]
            g = sw * clip_dloss(loss.dloss(p, y))
            if update_b:
                # Secant of the full per-example gradient between v and w
                # (erratum), both measured on this example.
                gv = sw * clip_dloss(loss.dloss(_margin(vp, vp[d], x, ind, nnz), y))
                _reestimate_B(q, x, ind, nnz, g - gv)
                update_b = False
            count -= 1
            if count <= 0:
                _skip_step(q)
                count = q.skip
                update_b = True
            if g != 0.0:
                for k in range(nnz):
                    j = ind[k]
                    w[j] -= g * Bp[j] * x[k]
                if fit_intercept:
                    b[0] -= g * Bp[d]
            t += 1
        pr.epochs += 1
        if not all_finite(w, d) or not isfinite(b[0]):
            pr.diverged = True
            break
    pr.t = t
    pr.count = count
    pr.update_b = update_b
    pr.rng = rng


def sgdqn_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1,
                 bint shuffle=True, bint fit_intercept=True):
    """Run ``n_epochs`` passes of SGD-QN over ``ds``, continuing ``state``.

    The arrays and counters of ``state`` are updated in place, also when the
    weights diverge (the caller then discards the state).

    Parameters
    ----------
    ds : RowDataset
        Rows with targets in {-1, +1} and sample weights.
    state : SGDQNState
        A started state (:meth:`SGDQNState.start`) with ``ds.n_features``
        features.
    options : SGDQNOptions
        ``lam`` and the curvature clip.
    loss : Loss
        Binary margin loss (required).
    n_epochs : int, default=1
        Passes over ``ds``.
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    fit_intercept : bool, default=True
        Whether the intercept is trained (it is never regularized).

    Returns
    -------
    result : SGDQNResult
        The counters after the call, the passes made and whether the
        weights diverged.
    """
    if not isinstance(state, SGDQNState) or not isinstance(options, SGDQNOptions):
        raise TypeError("sgdqn_epochs takes an SGDQNState and an SGDQNOptions")
    if loss is None:
        raise ValueError("a binary loss is required")
    if not state.started:
        raise ValueError("the state has no t0 and skip yet: call its start() first")
    # The memoryviews keep the state's arrays alive while the loop runs
    # without the GIL on raw pointers into them.
    cdef double[::1] coef = state.coef
    cdef double[::1] intercept = state.intercept
    cdef double[::1] B = state.B
    cdef double[::1] invB = state.invB
    cdef double[::1] v = state.v
    cdef double r_max = options.r_max
    cdef Py_ssize_t d = ds.n_features
    if (coef.shape[0] != d or intercept.shape[0] != 1 or B.shape[0] != d + 1
            or invB.shape[0] != d + 1 or v.shape[0] != d + 1):
        raise ValueError("the state's coef/intercept/B/invB/v do not match the data")
    if state.skip < 1:
        raise ValueError("skip must be >= 1")
    cdef Problem q
    q.w = &coef[0] if d > 0 else NULL
    q.b = &intercept[0]
    q.B = &B[0]
    q.invB = &invB[0]
    q.v = &v[0]
    q.d = d
    q.lam = options.lam
    q.skip = state.skip
    q.dskip = <double>q.skip
    q.rlo = R_MIN * q.lam
    q.rhi = r_max * q.lam
    q.fit_intercept = fit_intercept
    q.shuffle = shuffle
    cdef Progress pr
    pr.t = state.t
    pr.count = state.count
    pr.update_b = state.update_b
    pr.rng = state.rng_state()
    pr.epochs = 0
    pr.diverged = False
    with nogil:
        _epochs_nogil(ds, loss, &q, &pr, n_epochs)
    state.t, state.count, state.update_b, state.seed = (
        pr.t, pr.count, bool(pr.update_b), pr.rng)
    return SGDQNResult(t=pr.t, seed=pr.rng, count=pr.count, update_b=bool(pr.update_b),
                       epochs=pr.epochs, diverged=bool(pr.diverged))


def primal_objective(RowDataset ds, state, options, *, Loss loss):
    """The primal cost (Eq. 1) of the weights of ``state`` on ``ds``.

    ``lam/2 ||w||^2 + sum_i s_i loss(w.x_i + b, y_i) / sum_i s_i``, with
    ``lam`` of ``options``.

    Parameters
    ----------
    ds : RowDataset
    state : SGDQNState
        Holds ``coef`` (``ds.n_features`` weights) and ``intercept``.
    options : SGDQNOptions
    loss : Loss

    Returns
    -------
    cost : float
        ``inf`` when the value is not finite.
    """
    cdef const double[::1] coef = state.coef
    cdef double intercept = state.intercept[0]
    cdef double lam = options.lam
    cdef Py_ssize_t d = ds.n_features
    if coef.shape[0] != d:
        raise ValueError("coef does not match the data")
    cdef const double* w = &coef[0] if d > 0 else NULL
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k
    cdef Py_ssize_t i
    cdef double y, sw, p, total = 0.0, wsum = 0.0, sq = 0.0
    with nogil:
        for i in range(d):
            sq += w[i] * w[i]
        for i in range(ds.n_samples):
            ds.row(i, &x, &ind, &nnz, &y, &sw)
            if sw == 0.0:
                continue
            p = intercept
            for k in range(nnz):
                p += w[ind[k]] * x[k]
            total += sw * loss.loss(p, y)
            wsum += sw
    obj = 0.5 * lam * sq + (total / wsum if wsum > 0 else 0.0)
    return obj if np.isfinite(obj) else np.inf


def csr_row_stats(const double[::1] data, const long long[::1] indptr,
                  const double[::1] sample_weight, bint fit_intercept):
    """One pass over a CSR matrix for SGD-QN's first-call choices.

    Returns the number of non-zero values (``skip='auto'``) and
    ``max_i s_i (||x_i||^2 + 1)`` (``+ 1`` with an intercept;
    ``t0='auto'``'s bound), the two O(nnz) statistics of the data, in one
    read of ``data`` instead of two NumPy passes with temporaries.

    Parameters
    ----------
    data : ndarray of shape (nnz,)
    indptr : ndarray of int64 of shape (n_samples + 1,)
    sample_weight : ndarray of shape (n_samples,)
    fit_intercept : bool

    Returns
    -------
    nnz : int
    max_norm : float
        ``inf`` when a squared norm overflows.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1, i
    cdef long long k, count = 0
    cdef double sq, v, best = 0.0, one = 1.0 if fit_intercept else 0.0
    if sample_weight.shape[0] != n:
        raise ValueError("sample_weight does not match the rows")
    with nogil:
        for i in range(n):
            sq = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                v = data[k]
                if v != 0.0:
                    count += 1
                    sq += v * v
            v = sample_weight[i] * (sq + one)
            if v > best:
                best = v
    return count, best
