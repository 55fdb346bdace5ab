"""Stochastic bound majorization (SBM): Algorithm 1 and what both kernels share.

Choromanska & Jebara, "Stochastic Bound Majorization" (arXiv 2013):
Algorithm 1 (the quadratic bound on a partition function, Theorem 1) is in
``_sbm_bound.pxd``, inlined into the two kernels: ``_sbm_full`` (Algorithm 2,
full rank) and ``_sbm_lowrank`` (Section 3.2). This module holds what both
kernels share at the Python level: the options and result types, the
states' common part (``SBMState``), the entry checks (``check_rows``), the
owner of a call's work buffers (``Workspace``, ``example_init``), and the
test hooks of the bound.

Model. A linear model with ``K`` outputs over the augmented row
``xt = (x, 1)`` (the 1 only with an intercept); parameters ``theta`` are the
C-order ``(n_features + fit_intercept, K)`` block, so coordinate ``i*K + a``
is feature ``i``, output ``a``.

- Multinomial (``K > 2`` classes): labels ``y = 0..K-1``, ``f(y) = e_y (x) xt``.
- Binary (``K = 1``): labels ``{-1, +1}``, ``f(-1) = 0``, ``f(+1) = xt``
  (the logistic model ``p(+1) = sigmoid(theta . xt)``).

In both cases ``f(y) = F[y] (x) xt`` for a small table ``F`` (``n_y x K``),
so Algorithm 1 runs on the coefficients: ``g = c (x) xt`` and
``l = (F[y] - c) (x) xt``, and one example's curvature is the Kronecker
product ``S_j (x) xt xt^T`` with ``S_j = sum_y beta_y u_y u_y^T`` (``K x K``,
``u_y = F[y] - c`` before the update). The kernels keep ``S_j`` as its
rank-one factors ``sqrt(beta_y) u_y`` (the first term has ``beta = 0``).

Objective. Sum form of scikit-learn's ``mean_i s_i loss_i + alpha/2 ||w||^2``:
``J = sum_i s_i loss_i + lam/2 ||w||^2`` with ``lam = n alpha`` (the paper's
lambda in Eq. 1; ``n`` rows per pass). Per example the gradient term
``s_i (c - F[y_i]) (x) xt + alpha w`` enters ``mu`` once (Algorithm 2 as
printed adds ``-f_j + lam theta / t`` once per label ``y``, which counts it
``|Omega|`` times). The intercept is not penalised: no ``alpha w`` term; its
curvature starts at ``lam`` like every coordinate (``M = I / lam``), which is
a proximal term and keeps the quadratic an upper bound.
"""
from dataclasses import dataclass

import numpy as np

from ._dataset import PassCounters


@dataclass(kw_only=True)
class SBMState(PassCounters):
    """What the states of both kernels share (``FullRankState``,
    ``LowRankState``; picklable, built by keyword).

    Attributes
    ----------
    n_features, n_outputs : int
    fit_intercept : bool
    theta : ndarray of shape (P,)
        The weights, the C-order ``(n_features + fit_intercept, n_outputs)``
        block (``P`` entries): coordinate ``i * n_outputs + a`` is feature
        ``i``, output ``a``; the intercept is the last row.
    t, seed : int
        As in ``PassCounters``.
    n_ref, lam, eta : int, float, float or None
        ``n`` in ``lam = n alpha`` (the rows of the first data), the paper's
        lambda (Eq. 1) and the step ``theta -= eta phi``, fixed by ``start``
        (None before).
    """

    n_features: int
    n_outputs: int
    fit_intercept: bool
    theta: np.ndarray
    n_ref: object = None
    lam: object = None
    eta: object = None

    @staticmethod
    def n_params(n_features, n_outputs, fit_intercept):
        """``P``, the length of ``theta``."""
        return (n_features + int(fit_intercept)) * n_outputs

    @property
    def started(self):
        """Whether ``start`` fixed the regulariser (and the low-rank head)."""
        return self.n_ref is not None

    def weights(self):
        """``(coef, intercept)``: flat C-order ``(n_features, n_outputs)`` and
        ``(n_outputs,)`` (zeros without an intercept)."""
        n_coef = self.n_features * self.n_outputs
        intercept = self.theta[n_coef:] if self.fit_intercept else np.zeros(self.n_outputs)
        return self.theta[:n_coef], intercept


@dataclass
class SBMOptions:
    """How an SBM kernel runs its passes (the state is separate: ``FullRankState``,
    ``LowRankState``).

    Attributes
    ----------
    alpha : float
        L2 strength per example (``lam / n``): each example adds
        ``alpha theta`` (intercept excluded) to ``mu``.
    eta : float
        Step ``theta -= eta phi`` (the paper's ``1/t``).
    batch_size : int
        Examples between two steps on ``theta`` (a pass also ends with one).
    surrogate : bool
        Full rank only: incremental majorization-minimisation instead of
        Algorithm 2's ``mu`` (see ``_sbm_full.full_epochs``).
    route : {'auto', 'woodbury', 'refactor'}
        Full rank with ``batch_size > 1``: how a batch's curvature enters
        ``M`` (``_sbm_full.batch_route`` for ``'auto'``); the same ``M`` up to
        rounding either way.
    """

    alpha: float
    eta: float
    batch_size: int = 1
    surrogate: bool = False
    route: str = "auto"


@dataclass
class SBMResult:
    """What an SBM kernel reports about its passes.

    Attributes
    ----------
    t : int
        Examples processed so far (the state's ``t`` after the passes).
    seed : int
        The shuffling RNG state after the passes.
    epochs : int
        Passes made, the one that diverged included.
    mean_loss : float
        Weighted mean log loss of the last pass at the pre-step weights.
    diverged : bool
        The weights overflowed (non-finite values), or a curvature update
        lost positive definiteness.
    """

    t: int
    seed: int
    epochs: int
    mean_loss: float
    diverged: bool


cdef class Workspace:
    """The work buffers of one kernel call (``_sbm_bound.pxd``): each request
    is a zeroed NumPy array kept alive by this object, so a kernel takes all
    its buffers before its nogil section and frees none by hand."""

    def __cinit__(self):
        self.arrays = []

    cdef double* doubles(self, Py_ssize_t n) except NULL:
        cdef double[::1] a = np.zeros(max(n, 1))
        self.arrays.append(a)
        return &a[0]

    cdef int* ints(self, Py_ssize_t n) except NULL:
        cdef int[::1] a = np.zeros(max(n, 1), dtype=np.intc)
        self.arrays.append(a)
        return &a[0]

    cdef unsigned char* flags(self, Py_ssize_t n) except NULL:
        cdef unsigned char[::1] a = np.zeros(max(n, 1), dtype=np.uint8)
        self.arrays.append(a)
        return &a[0]


cdef int example_init(Example* ex, Workspace ws, Py_ssize_t n_features, int K) except -1:
    """Give ``ex`` its buffers for rows of ``n_features`` and ``K`` outputs
    and fill ``F``: ``f(-1) = 0, f(+1) = xt`` (``K = 1``) or ``f(y) = e_y (x)
    xt``."""
    cdef int a
    ex.K = K
    ex.n_y = 2 if K == 1 else K
    ex.idx = ws.ints(n_features + 1)
    ex.val = ws.doubles(n_features + 1)
    ex.Lt = ws.doubles(ex.n_y * K)
    ex.gcoef = ws.doubles(K)
    ex.scores = ws.doubles(K)
    ex.F = ws.doubles(ex.n_y * K)
    ex.la = ws.doubles(ex.n_y)
    ex.c = ws.doubles(K)
    ex.U = ws.doubles(ex.n_y * K)
    ex.beta = ws.doubles(ex.n_y)
    if K == 1:
        ex.F[1] = 1.0
    else:
        for a in range(K):
            ex.F[a * K + a] = 1.0
    return 0


cpdef Py_ssize_t check_rows(ds, state, Py_ssize_t start, object stop) except -1:
    """The checks both kernels make on entry: the data match the state, the
    state is started, ``start:stop`` is a block of the rows. Returns ``stop``
    (the number of rows when None)."""
    if ds.n_features != state.n_features:
        raise ValueError(f"the data have {ds.n_features} features, the state "
                         f"{state.n_features}")
    if not state.started:
        raise ValueError(f"{type(state).__name__}.start must be called before the first pass")
    cdef Py_ssize_t stop_ = ds.n_samples if stop is None else stop
    if not 0 <= start <= stop_ <= ds.n_samples:
        raise ValueError(f"rows {start}:{stop_} out of the data's {ds.n_samples}")
    return stop_


cdef object finish_passes(object state, PassTotals tot, unsigned int rng, int epochs_run,
                          bint diverged):
    """Store the counters of the passes of either kernel in ``state`` (its
    ``t`` and ``seed``) and report them as an ``SBMResult``; a pass that
    diverged counts as made."""
    state.t = tot.t
    state.seed = rng
    return SBMResult(t=tot.t, seed=rng, epochs=epochs_run + (1 if diverged else 0),
                     mean_loss=tot.loss_sum / tot.w_sum if tot.w_sum > 0 else 0.0,
                     diverged=diverged)


def bound(F, logalpha):
    """Algorithm 1 (test hook): ``(log z, g, Sigma)`` for ``f(y) = F[y]``.

    Parameters
    ----------
    F : ndarray of shape (n_y, dim)
        The feature vectors ``f(y)``.
    logalpha : ndarray of shape (n_y,)
        ``log h(y) + theta~ . f(y)``.

    Returns
    -------
    logz : float
    g : ndarray of shape (dim,)
    Sigma : ndarray of shape (dim, dim)
        With these, ``logz + d.g + d.Sigma.d / 2 >= log sum_y h(y) exp(theta.f(y))``
        for every ``theta`` (``d = theta - theta~``), Theorem 1.
    """
    cdef double[:, ::1] Fv = np.ascontiguousarray(F, dtype=np.float64)
    cdef double[::1] la = np.ascontiguousarray(logalpha, dtype=np.float64)
    cdef int n_y = Fv.shape[0], dim = Fv.shape[1]
    if la.shape[0] != n_y or n_y == 0:
        raise ValueError("F and logalpha must have the same (non-zero) length")
    cdef double[::1] c = np.zeros(dim)
    U = np.zeros((n_y, dim))
    beta = np.zeros(n_y)
    cdef double[:, ::1] Uv = U
    cdef double[::1] bv = beta
    cdef double logz = partition_bound(n_y, dim, &Fv[0, 0], &la[0], &c[0], &Uv[0, 0],
                                       &bv[0])
    return logz, np.asarray(c), (U.T * beta) @ U


def beta_py(double r):
    """``tanh(r/2) / (2 r)`` with its limits (test hook of ``bound_beta``)."""
    return bound_beta(r)
