"""Low-rank stochastic bound majorization (Choromanska & Jebara, Section 3.2).

``Sigma <= V^T S V + D_head`` on the *head* coordinates (the most frequent
features, all outputs, and the intercept; ``V``: ``k x H``), diagonal ``D``
on the others (the *tail*). A term ``S_j (x) xt xt^T`` with ``xt = xh +
xtl`` (head / tail parts) is split by ``(a + b)(a + b)^T <= (1 + g) a a^T +
(1 + 1/g) b b^T`` (``g = ||xtl|| / ||xh||``): the head part is merged factor
by factor (what leaves the rank-``k`` span goes into ``D_head``), the tail
part is bounded by ``diag(|S_j| 1) (x) ||xtl||_1 diag(|xtl|)``
(``bound_tail``). With every feature in the head this is the paper's
low-rank update.

``phi = Sigma^-1 mu`` is then block diagonal: Woodbury on the head,
``mu_i / D_i`` on the tail. The tail is applied lazily (``_sbm_lazy.pxd``).
The head comes in two forms (``LowRankState.lazy_head``,
``_sbm_lowrank_sigma.pxd``):

- dense: ``D_head`` per coordinate; an example costs ``O(r k H + K nnz)``
  (``r <= K`` rank-one factors), a step ``O(k^2 H)``;
- lazy: ``D_head = delta I``, applied lazily too (``_sbm_lowrank.pxd``): an
  example costs ``O(k K nnz + r k^4)`` and a step ``O(k^3 + k K)``, whatever
  ``H`` and the number of features; every ``H`` steps, and at the end of a
  pass, the head is made explicit in ``O(k H)``. The bound is looser: a
  dropped direction's curvature lands on every head coordinate.
"""
from dataclasses import dataclass

import numpy as np

from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset

from ._dataset cimport RowDataset, prefetch_row
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, example_alloc, example_free, finish_passes, read_row, start_totals)
from ._sbm_lazy cimport advance_tail
from ._sbm_lowrank_sigma cimport (
    LowRank, head_solve, lowrank_scratch_alloc, lowrank_scratch_free, merge, merge_dense,
    orthonormalize, woodbury_solve)


@dataclass
class LowRankState:
    """The state of low-rank SBM on one problem (picklable).

    All arrays but ``theta`` are allocated by ``start``, which chooses the
    head. Head coordinate ``slot * n_outputs + a`` is output ``a`` of the
    feature in head slot ``slot`` (the intercept last).

    Attributes
    ----------
    n_features, n_outputs : int
    fit_intercept : bool
    theta : ndarray of shape (P,)
        The weights, the C-order ``(n_features + fit_intercept, n_outputs)``
        block, current at the end of every pass.
    t : int
        Examples processed so far.
    seed : int
        The shuffling RNG state.
    n_ref, lam, eta : int, float, float or None
        ``n`` in ``lam = n alpha``, the paper's lambda (Eq. 1) and the step
        ``eta``, fixed by ``start`` on the first data (None before).
    head_slot : int32 ndarray of shape (n_features + 1,)
        Head slot of each feature (index ``n_features``: the intercept), -1
        for tail features.
    head_coords : intp ndarray of shape (H,)
        The coordinate of ``theta`` of each head coordinate.
    mu, D : ndarray of shape (P,)
        The gradient sum and the diagonal bound; only their tail entries are
        used (the head's are ``mu_head``, ``D_head``).
    mu_head, D_head : ndarray of shape (H,)
        ``D_head``: the head's diagonal; with the lazy head every entry is
        ``delta``.
    V : ndarray of shape (k + 1, H)
        Rows ``0..k-1``: the orthonormal ``V``; row ``k`` is workspace.
    S : ndarray of shape (k, k)
    tau : int64 ndarray of shape (n_features,)
        Per tail feature, steps of the current pass already applied (0
        between calls).
    lazy_head : bool
        The head's form (``_sbm_lowrank_sigma.pxd``): lazy, ``D_head = delta
        I`` and O(k nnz) an example, or dense, ``D_head`` per coordinate
        (tighter) and O(k H) an example.
    """

    n_features: int
    n_outputs: int
    fit_intercept: bool
    theta: np.ndarray
    t: int = 0
    seed: int = 1
    n_ref: object = None
    lam: object = None
    eta: object = None
    head_slot: np.ndarray = None
    head_coords: np.ndarray = None
    mu: np.ndarray = None
    D: np.ndarray = None
    mu_head: np.ndarray = None
    D_head: np.ndarray = None
    V: np.ndarray = None
    S: np.ndarray = None
    tau: np.ndarray = None
    lazy_head: bool = False

    @classmethod
    def zeros(cls, n_features, n_outputs, fit_intercept, seed=1):
        """Zero weights; the curvature comes with ``start``."""
        P = (n_features + int(fit_intercept)) * n_outputs
        return cls(n_features=n_features, n_outputs=n_outputs,
                   fit_intercept=bool(fit_intercept), theta=np.zeros(P), seed=seed)

    @property
    def started(self):
        """Whether ``start`` fixed the head and the regulariser."""
        return self.n_ref is not None

    def start(self, n_ref, lam, eta, head, rank, lazy_head=False):
        """Fix ``n``, ``lam = n alpha``, ``eta`` and the head on the first data.

        Parameters
        ----------
        n_ref : int
        lam : float
            Initial curvature of every coordinate (``Sigma = lam I``).
        eta : float
        head : array-like of int
            The head features, sorted (the intercept joins them).
        rank : int
            ``k``, capped at the head's dimension ``H``; ``V`` starts as the
            first ``k`` unit vectors with ``S = 0``.
        lazy_head : bool
            The head's form (see the class).
        """
        d, K = self.n_features, self.n_outputs
        head = np.asarray(head, dtype=np.intp)
        self.n_ref, self.lam, self.eta = n_ref, lam, eta
        slots = np.full(d + 1, -1, dtype=np.int32)
        slots[head] = np.arange(head.size, dtype=np.int32)
        feats = list(head)
        if self.fit_intercept:
            slots[d] = head.size
            feats.append(d)
        feats = np.asarray(feats, dtype=np.intp)
        H = feats.size * K
        k = min(rank, H)
        V = np.zeros((k + 1, H))
        V[np.arange(k), np.arange(k)] = 1.0
        self.head_slot = slots
        self.head_coords = (feats[:, None] * K + np.arange(K)).ravel()
        self.mu = np.zeros(self.theta.size)
        self.D = np.full(self.theta.size, lam)
        self.mu_head = np.zeros(H)
        self.D_head = np.full(H, lam)
        self.V = V
        self.S = np.zeros((k, k))
        self.tau = np.zeros(d, dtype=np.int64)
        self.lazy_head = bool(lazy_head)

    def grow_regulariser(self, n_ref, lam, eta):
        """Size the regulariser for ``n_ref`` rows: raise every coordinate's
        curvature to ``lam`` (``D += lam - self.lam``: the diagonal of
        ``V^T S V + D``) and take the step ``eta`` (the estimator's ``n_t``
        schedule). Between passes only: the tail is current then."""
        delta = lam - self.lam
        if delta > 0:
            self.D += delta
            self.D_head += delta
        self.n_ref, self.lam, self.eta = n_ref, lam, eta

    def weights(self):
        """``(coef, intercept)``: flat C-order ``(n_features, n_outputs)`` and
        ``(n_outputs,)`` (zeros without an intercept)."""
        n_coef = self.n_features * self.n_outputs
        intercept = self.theta[n_coef:] if self.fit_intercept else np.zeros(self.n_outputs)
        return self.theta[:n_coef], intercept


cdef int parts_alloc(RowParts* rp, Py_ssize_t n_features, int H, int K) noexcept nogil:
    """Allocate the buffers of ``rp`` (zeroed first); 0 when out of memory."""
    rp.hslot = <int*>malloc((n_features + 2) * sizeof(int))
    rp.hval = <double*>malloc((n_features + 2) * sizeof(double))
    rp.tfeat = <int*>malloc((n_features + 2) * sizeof(int))
    rp.tval = <double*>malloc((n_features + 2) * sizeof(double))
    rp.z = <double*>malloc((H + 1) * sizeof(double))
    rp.zidx = <int*>malloc((H + 1) * sizeof(int))
    rp.rowabs = <double*>malloc(K * sizeof(double))
    rp.phi_head = <double*>malloc((H + 1) * sizeof(double))
    return not (rp.hslot == NULL or rp.hval == NULL or rp.tfeat == NULL or rp.tval == NULL
                or rp.z == NULL or rp.zidx == NULL or rp.rowabs == NULL
                or rp.phi_head == NULL)


cdef void parts_free(RowParts* rp) noexcept nogil:
    free(rp.hslot)
    free(rp.hval)
    free(rp.tfeat)
    free(rp.tval)
    free(rp.z)
    free(rp.zidx)
    free(rp.rowabs)
    free(rp.phi_head)


cdef int head_alloc(Head* hd, int k, int H) noexcept nogil:
    """Allocate the buffers of ``hd`` (zeroed first, ``th`` and ``mu`` not
    its own); 0 when out of memory."""
    cdef size_t kk = <size_t>k * k + 1
    hd.vt = <double*>malloc((<size_t>H * k + 1) * sizeof(double))
    hd.held = <unsigned char*>calloc(H + 1, 1)
    hd.P = <double*>malloc(kk * sizeof(double))
    hd.gam = <double*>malloc((2 * k + 1) * sizeof(double))
    hd.Y = <double*>malloc((2 * k + 1) * sizeof(double))
    hd.W = <double*>malloc(kk * sizeof(double))
    hd.q = <double*>malloc((k + 1) * sizeof(double))
    hd.u = <double*>malloc((k + 1) * sizeof(double))
    hd.M = <double*>malloc(kk * sizeof(double))
    hd.Pn = <double*>malloc(kk * sizeof(double))
    hd.C = <double*>malloc(((k + 1) * k + 1) * sizeof(double))
    hd.f = <double*>malloc((k + 1) * sizeof(double))
    hd.work = <double*>malloc((k + 1) * sizeof(double))
    return not (hd.vt == NULL or hd.held == NULL or hd.P == NULL or hd.gam == NULL
                or hd.Y == NULL or hd.W == NULL or hd.q == NULL or hd.u == NULL
                or hd.M == NULL or hd.Pn == NULL or hd.C == NULL or hd.f == NULL
                or hd.work == NULL)


cdef void head_free(Head* hd) noexcept nogil:
    free(hd.vt)
    free(hd.held)
    free(hd.P)
    free(hd.gam)
    free(hd.Y)
    free(hd.W)
    free(hd.q)
    free(hd.u)
    free(hd.M)
    free(hd.Pn)
    free(hd.C)
    free(hd.f)
    free(hd.work)


cdef void head_start(Head* hd, const LowRank* lr) noexcept nogil:
    """Start a pass from the explicit head (``th``, ``mu``, the rows ``V``):
    ``V~ = V``, ``P = I``, ``Phi = I``, ``Gam = 0``, so ``y_h = x_h``."""
    cdef int h, r, k = hd.k
    for h in range(hd.H):
        for r in range(k):
            hd.vt[<size_t>h * k + r] = lr.V[<size_t>r * hd.H + h]
        hd.held[h] = 0
    for r in range(k * k):
        hd.P[r] = 1.0 if r % (k + 1) == 0 else 0.0
    restart_propagator(hd)


cdef void head_finish(Head* hd, LowRank* lr) noexcept nogil:
    """End a pass: the head explicit again (``th``, ``mu`` and ``V = P V~``)."""
    cdef int h, r, s, k = hd.k
    cdef double v
    flush_lazy(hd)
    for h in range(hd.H):
        for r in range(k):
            v = 0.0
            for s in range(k):
                v += hd.P[r * k + s] * hd.vt[<size_t>h * k + s]
            lr.V[<size_t>r * hd.H + h] = v


cdef int lowrank_pass(RowDataset ds, Py_ssize_t start, Py_ssize_t stop,
                      const LowRankKernel* kr, LowRank* lr, Head* hd, Example* ex,
                      RowParts* rp, PassTotals* tot) noexcept nogil:
    """One pass over the rows ``start:stop`` in their current order (a step
    after every ``batch_size`` examples and after the last one), then the
    tail and a lazy head brought up to date and ``V`` re-orthonormalised.
    Returns 0 when a step failed (then the pass stops there)."""
    cdef Py_ssize_t i
    cdef long long step = 0
    cdef int since = 0
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    if kr.lazy_head and hd.H > 0:
        head_start(hd, lr)
    for i in range(start, stop):
        # the rows come in shuffled order: fetch row i + 2's entries, and the
        # tail state row i + 1 will touch (its entries are in cache by now),
        # while this row is processed
        prefetch_row(ds, i + 2)
        prefetch_tail(ds, i + 1, kr)
        if not read_row(ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        lowrank_example(kr, lr, hd, ex, rp, step)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        step += 1
        tot.t += 1
        since += 1
        if since == kr.batch_size or step == kr.n_steps:
            if not head_step(kr, lr, hd, rp):
                if kr.lazy_head:
                    head_finish(hd, lr)
                return 0
            since = 0
    finish_tail(kr)
    if kr.lazy_head and hd.H > 0:
        head_finish(hd, lr)
    orthonormalize(lr)
    return 1


def lowrank_epochs(RowDataset ds, state, opts, Py_ssize_t start=0, stop=None):
    """Low-rank stochastic bound majorization (Section 3.2), in place.

    Per example (``lowrank_example``): the tail coordinates of the row are
    caught up (``advance_tail``), Algorithm 1 runs at the current weights,
    the example's curvature is split between the low-rank head
    (``merge_head``) and the diagonal tail (``bound_tail``), and its gradient
    enters ``mu`` (``add_gradient``); on the lazy head the row's head
    coordinates are made explicit for the example and lazy again after it.
    After every ``batch_size`` examples (and the last of a pass) the head
    steps by Woodbury (``head_step``).

    Parameters
    ----------
    ds : RowDataset
        Targets: +-1 (``n_outputs == 1``) or class indices.
    state : LowRankState
        Started (``state.start``); its arrays, ``t`` and ``seed`` are updated
        in place.
    opts : SBMOptions
        ``surrogate`` must be False.
    start, stop : int
        The passes visit the rows ``start:stop`` of ``ds``'s current order
        (all by default; a block of a shuffled pass without copying it, then
        with ``opts.shuffle`` False: the block is a set of rows).

    Returns
    -------
    result : SBMResult
    """
    if opts.surrogate:
        raise ValueError("the surrogate update is implemented for full rank only")
    if ds.n_features != state.n_features:
        raise ValueError(f"the data have {ds.n_features} features, the state "
                         f"{state.n_features}")
    if not state.started:
        raise ValueError("LowRankState.start must be called before the first pass")
    cdef Py_ssize_t stop_ = ds.n_samples if stop is None else stop
    if not 0 <= start <= stop_ <= ds.n_samples:
        raise ValueError(f"rows {start}:{stop_} out of the data's {ds.n_samples}")
    if opts.shuffle and (start, stop_) != (0, ds.n_samples):
        raise ValueError("a block of rows (start:stop) is passed in its order: "
                         "opts.shuffle must be False")
    theta_arr = state.theta
    head_coords = state.head_coords
    theta_head_arr = theta_arr[head_coords]     # the head's weights during the passes
    cdef double[::1] theta = theta_arr
    cdef double[::1] mu = state.mu
    cdef double[::1] D = state.D
    cdef double[::1] th_h = theta_head_arr
    cdef double[::1] mu_h = state.mu_head
    D_h_arr = state.D_head
    cdef double[:, ::1] V = state.V
    cdef double[:, ::1] S = state.S
    cdef const int[::1] head_slot = state.head_slot
    cdef long long[::1] tau = state.tau
    cdef LowRankKernel kr
    cdef LowRank lr
    cdef Head hd
    cdef Py_ssize_t d = ds.n_features, i
    memset(&lr, 0, sizeof(LowRank))
    memset(&hd, 0, sizeof(Head))
    kr.K = state.n_outputs
    kr.n_features = d
    kr.fit_intercept = state.fit_intercept
    kr.P = <int>((d + (1 if kr.fit_intercept else 0)) * kr.K)
    kr.H = lr.H = hd.H = <int>th_h.shape[0]
    lr.k = hd.k = <int>S.shape[0]
    hd.K = kr.K
    if theta.shape[0] != kr.P or mu.shape[0] != kr.P or D.shape[0] != kr.P:
        raise ValueError("theta / mu / D do not match the data shape")
    if (mu_h.shape[0] != kr.H or D_h_arr.shape[0] != kr.H or V.shape[0] != lr.k + 1
            or V.shape[1] != kr.H):
        raise ValueError("the head arrays do not match")
    if head_slot.shape[0] != d + 1 or tau.shape[0] != d:
        raise ValueError("head_slot / tau do not match the data shape")
    # (no intercept: a block no head coordinate falls in)
    hd.icpt_lo = head_slot[d] * kr.K if kr.fit_intercept else -2 * kr.K - 1
    kr.batch_size = opts.batch_size
    kr.lazy_head = state.lazy_head
    kr.alpha = opts.alpha
    kr.eta = opts.eta
    kr.n_steps = 0
    for i in range(start, stop_):
        if ds.sample_weight[ds.order_ptr[i]] != 0.0:
            kr.n_steps += 1
    kr.head_slot = &head_slot[0]
    kr.theta = &theta[0]
    kr.mu = &mu[0]
    kr.D = &D[0]
    hd.th = &th_h[0] if kr.H > 0 else NULL
    hd.mu = &mu_h[0] if kr.H > 0 else NULL
    kr.tau = &tau[0] if d > 0 else NULL
    lr.V = &V[0, 0] if kr.H > 0 else NULL
    lr.S = &S[0, 0] if lr.k > 0 else NULL
    cdef double[::1] D_h = D_h_arr
    lr.Dh = &D_h[0] if kr.H > 0 else NULL
    lr.delta = float(D_h_arr.max()) if kr.H > 0 else state.lam
    result = _run_passes(ds, start, stop_, state, opts, &kr, &lr, &hd, theta_arr,
                         head_coords, theta_head_arr)
    if kr.lazy_head:
        D_h_arr[:] = lr.delta
    return result


cdef _run_passes(RowDataset ds, Py_ssize_t start, Py_ssize_t stop, state, opts,
                 LowRankKernel* kr, LowRank* lr, Head* hd, theta_arr, head_coords,
                 theta_head_arr):
    """The passes of ``lowrank_epochs`` on the bound arrays; the head's
    weights are written back into ``theta`` at the end."""
    cdef int n_epochs = opts.n_epochs, _epoch, epochs_run = 0
    cdef bint shuffle = opts.shuffle, diverged = False
    cdef unsigned int seed = state.seed
    cdef unsigned int rng = seed if seed != 0 else 1
    cdef PassTotals tot = start_totals(state.t)
    cdef Example ex
    cdef RowParts rp
    memset(&ex, 0, sizeof(Example))
    memset(&rp, 0, sizeof(RowParts))
    try:
        if (not example_alloc(&ex, kr.n_features, kr.K) or not lowrank_scratch_alloc(lr)
                or not parts_alloc(&rp, kr.n_features, kr.H, kr.K)
                or not head_alloc(hd, lr.k, kr.H)):
            raise MemoryError()
        lr.zi = rp.zidx
        lr.nzi = 0
        with nogil:
            for _epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                if not lowrank_pass(ds, start, stop, kr, lr, hd, &ex, &rp, &tot):
                    diverged = True
                    break
                if (not all_finite(kr.theta, kr.P)
                        or (kr.H > 0 and not all_finite(hd.th, kr.H))):
                    diverged = True          # (reported as pass epochs_run + 1)
                    break
                epochs_run += 1
    finally:
        example_free(&ex)
        lowrank_scratch_free(lr)
        parts_free(&rp)
        head_free(hd)
    theta_arr[head_coords] = theta_head_arr
    return finish_passes(state, tot, rng, epochs_run, diverged)


# ----------------------------------------------------------------------------
# test hooks
# ----------------------------------------------------------------------------
def merge_py(V, S, D, z):
    """One ``merge`` on copies (test hook): returns ``(V, S, D)`` after absorbing ``z z^T``."""
    cdef LowRank lr
    V = np.asarray(V, dtype=np.float64)
    cdef int k = V.shape[0], H = V.shape[1]
    Vw = np.zeros((k + 1, H))
    Vw[:k] = V
    Sc = np.array(S, dtype=np.float64, copy=True).reshape(k, k)
    Dc = np.array(D, dtype=np.float64, copy=True)
    zc = np.array(z, dtype=np.float64, copy=True)
    cdef double[:, ::1] Vv = Vw
    cdef double[::1] Sv = Sc.reshape(-1) if k > 0 else np.zeros(1)
    cdef double[::1] Dv = Dc
    cdef double[::1] zv = zc
    memset(&lr, 0, sizeof(LowRank))
    lr.k = k
    lr.H = H
    lr.V = &Vv[0, 0]
    lr.S = &Sv[0]
    lr.Dh = &Dv[0]
    lr.nzi = -1                       # z is dense
    try:
        if not lowrank_scratch_alloc(&lr):
            raise MemoryError()
        merge(&lr, &zv[0])
    finally:
        lowrank_scratch_free(&lr)
    return Vw[:k].copy(), np.asarray(Sv).reshape(k, k).copy() if k > 0 else Sc, Dc


def merge_isotropic_py(V, S, double delta, z):
    """The lazy head's merge written densely, on copies (test hook): returns
    ``(V, S, delta)`` after absorbing ``z z^T`` into ``V^T S V + delta I``."""
    cdef LowRank lr
    V = np.asarray(V, dtype=np.float64)
    cdef int k = V.shape[0], H = V.shape[1]
    Vw = np.zeros((k + 1, H))
    Vw[:k] = V
    Sc = np.array(S, dtype=np.float64, copy=True).reshape(k, k)
    zc = np.array(z, dtype=np.float64, copy=True)
    cdef double[:, ::1] Vv = Vw
    cdef double[::1] Sv = Sc.reshape(-1) if k > 0 else np.zeros(1)
    cdef double[::1] zv = zc
    memset(&lr, 0, sizeof(LowRank))
    lr.k = k
    lr.H = H
    lr.V = &Vv[0, 0]
    lr.S = &Sv[0]
    lr.delta = delta
    try:
        if not lowrank_scratch_alloc(&lr):
            raise MemoryError()
        merge_dense(&lr, &zv[0])
    finally:
        lowrank_scratch_free(&lr)
    return Vw[:k].copy(), np.asarray(Sv).reshape(k, k).copy() if k > 0 else Sc, lr.delta


def woodbury_py(double[:, ::1] V, double[:, ::1] S, double[::1] D, double[::1] mu):
    """``(V^T S V + diag(D))^-1 mu`` by the kernel's Woodbury (test hook)."""
    cdef LowRank lr
    cdef int k = V.shape[0], H = V.shape[1], ok = 0
    Vw = np.zeros((k + 1, H))
    Vw[:k] = V
    cdef double[:, ::1] Vv = Vw
    cdef double[:, ::1] Sv = np.array(S, dtype=np.float64, copy=True)
    cdef double[::1] Dv = np.array(D, dtype=np.float64, copy=True)
    cdef double[::1] phi = np.zeros(H)
    memset(&lr, 0, sizeof(LowRank))
    lr.k = k
    lr.H = H
    lr.V = &Vv[0, 0]
    lr.S = &Sv[0, 0] if k > 0 else NULL
    lr.Dh = &Dv[0]
    try:
        if not lowrank_scratch_alloc(&lr):
            raise MemoryError()
        ok = woodbury_solve(&lr, &mu[0], &phi[0])
    finally:
        lowrank_scratch_free(&lr)
    if not ok:
        raise np.linalg.LinAlgError("singular capacitance matrix")
    return np.asarray(phi)


def head_solve_py(V, S, double delta, mu):
    """``(V^T S V + delta I)^-1 mu`` by the lazy head's ``head_solve`` (test hook)."""
    cdef LowRank lr
    V = np.ascontiguousarray(V, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    cdef int k = V.shape[0], ok = 0
    cdef double[:, ::1] Sv = np.array(S, dtype=np.float64, copy=True).reshape(k, k)
    cdef double[:, ::1] G = V @ V.T
    cdef double[::1] vmu = V @ mu
    cdef double[::1] a = np.zeros(k + 1)
    memset(&lr, 0, sizeof(LowRank))
    lr.k = k
    lr.H = V.shape[1]
    lr.S = &Sv[0, 0]
    lr.delta = delta
    try:
        if not lowrank_scratch_alloc(&lr):
            raise MemoryError()
        ok = head_solve(&lr, &G[0, 0], &vmu[0], &a[0])
    finally:
        lowrank_scratch_free(&lr)
    if not ok:
        raise np.linalg.LinAlgError("singular capacitance matrix")
    return (mu - V.T @ np.asarray(a)[:k]) / delta


def advance_py(double th, double mu, double c, double alpha, long long tau, long long t,
               long long b, long long n):
    """``advance_tail`` on one coordinate (test hook): returns ``(th, mu)``."""
    advance_tail(&th, &mu, c, alpha, tau, t, b, n)
    return th, mu
