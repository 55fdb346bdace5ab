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
``mu_i / D_i`` on the tail. The tail is applied lazily (the section "The
tail's lazy recurrence"). The head comes in two forms
(``LowRankState.lazy_head``), behind one interface (``HeadOps``, chosen once
per call by ``head_ops``):

- dense: ``D_head`` per coordinate; an example costs ``O(r k H + K nnz)``
  (``r <= K`` rank-one factors), a step ``O(k^2 H)``;
- lazy: ``D_head = delta I``, applied lazily too (the section "The
  per-example update"): an
  example costs ``O(k K nnz + r k^4)`` and a step ``O(k^3 + k K)``, whatever
  ``H`` and the number of features; every ``H`` steps, and at the end of a
  pass, the head is made explicit in ``O(k H)``. The bound is looser: a
  dropped direction's curvature lands on every head coordinate.

Three modules, in the order an example meets them: this one (the tail's
lazy recurrence, the per-example update, the state, the passes),
``_sbm_heads`` (the two heads behind ``HeadOps``) and
``_sbm_lowrank_bound`` (the low-rank bound ``V^T S V + D`` and its
operations). The work buffers of a call are NumPy arrays owned by one
``Workspace``, taken before the nogil section.
"""
from dataclasses import dataclass

import numpy as np

from libc.math cimport fabs, sqrt
from libc.string cimport memset

from ._dataset cimport RowDataset
from ._linalg cimport strided_dot
from ._numeric cimport all_finite
from ._prefetch cimport prefetch_read, prefetch_row
from ._sbm_bound cimport (
    Example, PassTotals, Workspace, check_rows, example_bound, example_init, finish_passes,
    read_row, start_totals)
from ._sbm_heads cimport Head, HeadOps, RowParts, head_init, head_ops
from ._sbm_lowrank_bound cimport LowRank, lowrank_scratch, orthonormalize

from ._sbm_bound import SBMState


# ======================================================================================
# The tail's lazy recurrence
# ======================================================================================
# The lazy update of the diagonal (tail) coordinates of low-rank SBM
# (this module). Between two touches a tail coordinate moves only through
# ``mu += alpha theta`` and ``theta -= c mu`` with a fixed ``c = eta / D_i``:
# a linear recurrence, applied in closed form when the coordinate is next
# touched, so an example costs nothing for the features it does not have.
# Inline: ``advance_tail`` runs once per tail entry of every row.


cdef extern from *:
    """
    /* 1 / ((2j + 2)(2j + 3)) for j < 64, the denominators of the series of
       U_{n-1}(1 - eps/2), folded by the compiler: a table, not a division,
       in the series loop */
    #define SKSO_SBM_RECIP(j) (1.0 / ((2.0 * (j) + 2.0) * (2.0 * (j) + 3.0)))
    #define SKSO_SBM_RECIP4(j) SKSO_SBM_RECIP(j), SKSO_SBM_RECIP((j) + 1), \\
        SKSO_SBM_RECIP((j) + 2), SKSO_SBM_RECIP((j) + 3)
    #define SKSO_SBM_RECIP16(j) SKSO_SBM_RECIP4(j), SKSO_SBM_RECIP4((j) + 4), \\
        SKSO_SBM_RECIP4((j) + 8), SKSO_SBM_RECIP4((j) + 12)
    static const double skso_sbm_series_recip[64] = {
        SKSO_SBM_RECIP16(0), SKSO_SBM_RECIP16(16),
        SKSO_SBM_RECIP16(32), SKSO_SBM_RECIP16(48)};
    """
    const double* SERIES_RECIP "skso_sbm_series_recip"


cdef enum:
    N_SERIES_RECIP = 64


cdef inline void chebyshev_u(double eps, long long m, double* u1, double* u0) noexcept nogil:
    """``U_{m-1}(x)`` and ``U_{m-2}(x)`` at ``x = 1 - eps/2`` for ``eps m^2 <= 1`` (m >= 1).

    Series ``U_{n-1}(1 - eps/2) = sum_j (-eps)^j C(n+j, 2j+1)``, summed to
    machine precision (terms fall at least factorially when ``eps n^2 <= 1``).
    Both series run in one loop (two independent chains).
    """
    cdef long long n1 = m, n0 = m - 1, j = 0
    cdef double t1 = <double>n1, s1 = <double>n1, t0, s0, q
    cdef bint go1 = n1 > 1, go0
    if n0 <= 0:
        t0 = 0.0
        s0 = 0.0
        go0 = False
    else:
        t0 = <double>n0
        s0 = t0
        go0 = n0 > 1
    while go1 or go0:
        q = -eps * (SERIES_RECIP[j] if j < N_SERIES_RECIP
                    else 1.0 / ((2.0 * j + 2.0) * (2.0 * j + 3.0)))
        if go1:
            t1 *= q * (<double>(n1 + j + 1)) * (<double>(n1 - j - 1))
            s1 += t1
            go1 = not (fabs(t1) <= 1e-17 * fabs(s1)) and j + 2 < n1
        if go0:
            t0 *= q * (<double>(n0 + j + 1)) * (<double>(n0 - j - 1))
            s0 += t0
            go0 = not (fabs(t0) <= 1e-17 * fabs(s0)) and j + 2 < n0
        j += 1
    u1[0] = s1
    u0[0] = s0


cdef inline void batch_power(double c, double balpha, long long m, double* th,
                             double* mu) noexcept nogil:
    """Apply ``m`` full batches of the lazy tail recurrence to ``(th, mu)``.

    One batch: ``mu += b alpha th`` (``b`` examples of the regularisation
    term with ``th`` fixed), then ``th -= c mu`` (``c = eta / D_i``). The map
    ``A = [[1 - c b alpha, -c], [b alpha, 1]]`` has determinant 1, so
    ``A^m = U_{m-1} A - U_{m-2} I`` (Chebyshev polynomials of the second kind
    at ``trace(A)/2``); repeated squaring when the series would be long.
    """
    cdef double eps = c * balpha
    cdef double a11 = 1.0 - eps, a12 = -c, a21 = balpha, a22 = 1.0
    cdef double u1, u0, t0, m0
    cdef double p11, p12, p21, p22, q11, q12, q21, q22, r11, r12, r21, r22
    cdef long long _it
    if m <= 0:
        return
    if m <= 8:
        # short gaps (frequent features): step the batches directly
        t0 = th[0]
        m0 = mu[0]
        for _it in range(m):
            m0 += balpha * t0
            t0 -= c * m0
        th[0] = t0
        mu[0] = m0
        return
    if eps * (<double>m) * (<double>m) <= 1.0:
        chebyshev_u(eps, m, &u1, &u0)
        t0 = th[0]
        m0 = mu[0]
        th[0] = (u1 * a11 - u0) * t0 + u1 * a12 * m0
        mu[0] = u1 * a21 * t0 + (u1 * a22 - u0) * m0
        return
    # repeated squaring: P = A^m
    p11, p12, p21, p22 = 1.0, 0.0, 0.0, 1.0
    q11, q12, q21, q22 = a11, a12, a21, a22
    while m > 0:
        if m & 1:
            r11 = p11 * q11 + p12 * q21
            r12 = p11 * q12 + p12 * q22
            r21 = p21 * q11 + p22 * q21
            r22 = p21 * q12 + p22 * q22
            p11, p12, p21, p22 = r11, r12, r21, r22
        m >>= 1
        if m:
            r11 = q11 * q11 + q12 * q21
            r12 = q11 * q12 + q12 * q22
            r21 = q21 * q11 + q22 * q21
            r22 = q21 * q12 + q22 * q22
            q11, q12, q21, q22 = r11, r12, r21, r22
    t0 = th[0]
    m0 = mu[0]
    th[0] = p11 * t0 + p12 * m0
    mu[0] = p21 * t0 + p22 * m0


cdef inline void advance_tail(double* th, double* mu, double c, double alpha, long long tau,
                              long long t, long long b, long long n) noexcept nogil:
    """Apply steps ``tau .. t-1`` of one untouched (diagonal) coordinate.

    Step ``s``: ``mu += alpha th``; when ``s`` ends a batch (``(s+1) % b == 0``
    or ``s == n-1``): ``th -= c mu``. Closed form: a partial batch, ``m`` full
    batches (``batch_power``), a partial batch. Exact, O(1) per call.
    """
    cdef long long e1, s, m, rem
    if t <= tau:
        return
    if b == 1:
        # every step ends a batch (the general path below, without its divisions)
        mu[0] += alpha * th[0]
        th[0] -= c * mu[0]
        batch_power(c, alpha, t - tau - 1, th, mu)
        return
    e1 = (tau // b + 1) * b
    if e1 > n:
        e1 = n
    if t < e1:
        mu[0] += (t - tau) * alpha * th[0]
        return
    mu[0] += (e1 - tau) * alpha * th[0]
    th[0] -= c * mu[0]
    s = e1
    if s >= t:
        return
    m = (t - s) // b
    if m > 0:
        batch_power(c, b * alpha, m, th, mu)
        s += m * b
    rem = t - s
    if rem > 0:
        mu[0] += rem * alpha * th[0]
        if s + rem == n:
            th[0] -= c * mu[0]


# ======================================================================================
# The per-example update and the two heads
# ======================================================================================
# The per-example update of low-rank SBM (Section 3.2), inlined into the
# pass (``lowrank_pass``): the row split into head and tail, the
# example's curvature into the head (``_sbm_heads``, on the bound of
# ``_sbm_lowrank_bound``) and the diagonal tail, its gradient into ``mu``,
# and the step. With the lazy head both parts are lazy, so an example costs
# O(k nnz) plus ``k x k`` work, whatever ``H`` and the number of features;
# a tail coordinate moves between its touches by a fixed linear recurrence
# (the first section), applied in closed form when it is next touched. The
# dense head steps every head coordinate at every step: O(k H) an example.


cdef struct LowRankKernel:
    # the kernel's view of a LowRankState and its SBMOptions
    int K                   # outputs
    int P                   # parameters, (n_features + fit_intercept) K
    int H                   # head coordinates
    Py_ssize_t n_features
    bint fit_intercept
    int batch_size
    bint lazy_head          # the lazy head (else the dense one)
    long long n_steps       # examples in a pass (rows with non-zero weight)
    double alpha
    double eta
    const int* head_slot    # n_features + 1
    double* theta           # P (tail entries; the head's are in Head.th)
    double* mu              # P (tail entries)
    double* D               # P (tail entries)
    long long* tau          # n_features


cdef inline void split_row(const LowRankKernel* kr, const Example* ex, RowParts* rp,
                           long long step) noexcept nogil:
    """Split the row into head and tail entries, and catch the tail
    coordinates up to ``step`` (their lazy recurrence, ``advance_tail``)
    before the example reads them."""
    cdef int j, a, slot, K = kr.K, nh = 0, nt = 0
    cdef Py_ssize_t q
    cdef double eta = kr.eta, alpha = kr.alpha, nh2 = 0.0, nt2 = 0.0, nt1 = 0.0
    cdef long long bsz = kr.batch_size, n_steps = kr.n_steps
    cdef const int* head_slot = kr.head_slot
    cdef double* th = kr.theta
    cdef double* mup = kr.mu
    cdef const double* Dp = kr.D
    cdef long long* taup = kr.tau
    for j in range(ex.nz):
        slot = head_slot[ex.idx[j]]
        if slot >= 0:
            rp.hslot[nh] = slot
            rp.hval[nh] = ex.val[j]
            nh2 += ex.val[j] * ex.val[j]
            nh += 1
        else:
            rp.tfeat[nt] = ex.idx[j]
            rp.tval[nt] = ex.val[j]
            nt2 += ex.val[j] * ex.val[j]
            nt1 += fabs(ex.val[j])
            q = <Py_ssize_t>ex.idx[j] * K
            for a in range(K):
                advance_tail(th + q + a, mup + q + a, eta / Dp[q + a], alpha,
                             taup[ex.idx[j]], step, bsz, n_steps)
            taup[ex.idx[j]] = step
            nt += 1
    rp.nh = nh
    rp.nt = nt
    rp.nh2 = nh2
    rp.nt2 = nt2
    rp.nt1 = nt1


cdef inline void row_scores(const LowRankKernel* kr, const Head* hd, Example* ex,
                            const RowParts* rp) noexcept nogil:
    """``scores[a] = theta_a . xt`` from the (held) head and the (caught-up) tail."""
    cdef int j, a, K = kr.K
    cdef Py_ssize_t q
    cdef const double* thh = hd.th
    cdef const double* th = kr.theta
    for a in range(K):
        ex.scores[a] = 0.0
    for j in range(rp.nh):
        for a in range(K):
            ex.scores[a] += rp.hval[j] * thh[rp.hslot[j] * K + a]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            ex.scores[a] += rp.tval[j] * th[q + a]


cdef inline void bound_tail(const LowRankKernel* kr, const Example* ex, const RowParts* rp,
                            double ft) noexcept nogil:
    """The tail part ``ft S_j (x) xtl xtl^T`` into the diagonal:
    ``D_i += ft (|S_j| 1)_a ||xtl||_1 |x_i|``."""
    cdef int j, a, b, K = kr.K, r = ex.r
    cdef Py_ssize_t q
    cdef double v, sc, nt1 = rp.nt1
    cdef double* rowabs = rp.rowabs
    cdef double* Dp = kr.D
    for a in range(K):
        v = 0.0
        for b in range(K):
            sc = strided_dot(r, ex.Lt + a, K, ex.Lt + b, K)     # (L L^T)_ab
            v += fabs(sc)
        rowabs[a] = v
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            Dp[q + a] += ft * rowabs[a] * nt1 * fabs(rp.tval[j])


cdef inline void add_gradient(const LowRankKernel* kr, Head* hd, const Example* ex,
                              const RowParts* rp) noexcept nogil:
    """``mu += s_j (c_j - F[y_j]) (x) xt`` on the row's head and tail
    coordinates; the ``alpha theta`` term (once per example, none on the
    intercept) is the head's ``regularise`` and, on the tail, its lazy
    recurrence."""
    cdef int j, a, K = kr.K
    cdef Py_ssize_t q
    cdef double* mup = kr.mu
    for j in range(rp.nh):
        for a in range(K):
            hd.mu[rp.hslot[j] * K + a] += ex.gcoef[a] * rp.hval[j]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            mup[q + a] += ex.gcoef[a] * rp.tval[j]


cdef inline void lowrank_example(const LowRankKernel* kr, const HeadOps* ops, LowRank* lr,
                                 Head* hd, Example* ex, RowParts* rp,
                                 long long step) noexcept nogil:
    """The update of one example (read by ``read_row``) before the step:
    Algorithm 1 at the current weights, its curvature split between the
    low-rank head and the diagonal tail, its gradient into ``mu``. The
    head's form (``ops``) holds the row's head coordinates explicit
    meanwhile if it keeps them lazy."""
    cdef double fh, ft, gsplit
    split_row(kr, ex, rp, step)
    ops.enter(hd, rp)
    row_scores(kr, hd, ex, rp)
    example_bound(ex)
    if rp.nt == 0:
        fh = 1.0
        ft = 0.0
    elif rp.nh == 0:
        fh = 0.0
        ft = 1.0
    else:
        gsplit = sqrt(rp.nt2 / rp.nh2)
        fh = 1.0 + gsplit
        ft = 1.0 + 1.0 / gsplit
    if rp.nh > 0 and ex.r > 0:
        ops.merge(lr, hd, ex, rp, fh)
    if rp.nt > 0 and ex.r > 0:
        bound_tail(kr, ex, rp, ft)
    add_gradient(kr, hd, ex, rp)
    ops.regularise(hd, rp, kr.alpha)
    ops.leave(hd, rp)


cdef inline void finish_tail(const LowRankKernel* kr) noexcept nogil:
    """Bring every tail coordinate to the end of the pass (``tau`` back to 0)."""
    cdef long long fb
    cdef int a, K = kr.K
    cdef Py_ssize_t q
    cdef double* th = kr.theta
    cdef double* mup = kr.mu
    cdef const double* Dp = kr.D
    cdef long long* taup = kr.tau
    cdef long long bsz = kr.batch_size, n_steps = kr.n_steps
    for fb in range(kr.n_features):
        if kr.head_slot[fb] >= 0:
            continue
        q = <Py_ssize_t>fb * K
        for a in range(K):
            if th[q + a] != 0.0 or mup[q + a] != 0.0:
                advance_tail(th + q + a, mup + q + a, kr.eta / Dp[q + a], kr.alpha,
                             taup[fb], n_steps, bsz, n_steps)
        taup[fb] = 0


# ======================================================================================
# The state, the passes, the test hooks
# ======================================================================================


@dataclass(kw_only=True)
class LowRankState(SBMState):
    """The state of low-rank SBM on one problem (picklable).

    All arrays but ``theta`` are allocated by ``start``, which chooses the
    head. Head coordinate ``slot * n_outputs + a`` is output ``a`` of the
    feature in head slot ``slot`` (the intercept last).

    Attributes
    ----------
    n_features, n_outputs, fit_intercept, theta, t, seed, n_ref, lam, eta
        As in ``SBMState`` (``theta`` is current at the end of every pass).
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
        The head's form (``HeadOps``): lazy, ``D_head = delta
        I`` and O(k nnz) an example, or dense, ``D_head`` per coordinate
        (tighter) and O(k H) an example.
    """

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
        P = cls.n_params(n_features, n_outputs, fit_intercept)
        return cls(n_features=n_features, n_outputs=n_outputs,
                   fit_intercept=bool(fit_intercept), theta=np.zeros(P), seed=seed)

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


cdef int parts_init(RowParts* rp, Workspace ws, Py_ssize_t n_features, int H,
                    int K) except -1:
    """Give ``rp`` its buffers from ``ws``."""
    rp.hslot = ws.ints(n_features + 2)
    rp.hval = ws.doubles(n_features + 2)
    rp.tfeat = ws.ints(n_features + 2)
    rp.tval = ws.doubles(n_features + 2)
    rp.z = ws.doubles(H + 1)
    rp.zidx = ws.ints(H + 1)
    rp.rowabs = ws.doubles(K)
    rp.phi_head = ws.doubles(H + 1)
    return 0


cdef int lowrank_pass(RowDataset ds, Py_ssize_t start, Py_ssize_t stop,
                      const LowRankKernel* kr, const HeadOps* ops, LowRank* lr, Head* hd,
                      Example* ex, RowParts* rp, PassTotals* tot) noexcept nogil:
    """One pass over the rows ``start:stop`` in their current order (a step
    after every ``batch_size`` examples and after the last one), then the
    tail and the head brought up to date and ``V`` re-orthonormalised.
    Returns 0 when a step failed (then the pass stops there)."""
    cdef Py_ssize_t i, nxt, q
    cdef long long kk
    cdef int f
    cdef long long step = 0
    cdef int since = 0
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    if hd.H > 0:
        ops.begin(hd, lr)
    for i in range(start, stop):
        # the rows come in shuffled order: fetch row i + 2's entries, and the
        # tail state row i + 1 will touch (its entries are in cache by now),
        # while this row is processed
        prefetch_row(ds, i + 2)
        if ds.is_sparse and i + 1 < ds.n_samples:
            # (written out here: a function of prefetches alone would be
            # deleted by GCC, _prefetch.h says why)
            nxt = ds.order_ptr[i + 1]
            for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
                f = ds.indices_ptr[kk]
                if kr.head_slot[f] < 0:
                    q = <Py_ssize_t>f * kr.K
                    prefetch_read(kr.theta + q)
                    prefetch_read(kr.mu + q)
                    prefetch_read(kr.D + q)
                    prefetch_read(kr.tau + f)
        if not read_row(ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        lowrank_example(kr, ops, lr, hd, ex, rp, step)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        step += 1
        tot.t += 1
        since += 1
        if since == kr.batch_size or step == kr.n_steps:
            if hd.H > 0 and not ops.step(hd, lr, rp, kr.eta):
                ops.finish(hd, lr)
                return 0
            since = 0
    finish_tail(kr)
    if hd.H > 0:
        ops.finish(hd, lr)
    orthonormalize(lr)
    return 1


def lowrank_epochs(RowDataset ds, state, opts, Py_ssize_t start=0, stop=None, *,
                   int n_epochs=1, bint shuffle=True):
    """Low-rank stochastic bound majorization (Section 3.2), in place.

    Per example (``lowrank_example``): the tail coordinates of the row are
    caught up (``advance_tail``), Algorithm 1 runs at the current weights,
    the example's curvature is split between the low-rank head
    (``HeadOps.merge``) and the diagonal tail (``bound_tail``), and its
    gradient enters ``mu`` (``add_gradient``, ``HeadOps.regularise``); on
    the lazy head the row's head coordinates are made explicit for the
    example and lazy again after it (``HeadOps.enter``, ``HeadOps.leave``).
    After every ``batch_size`` examples (and the last of a pass) the head
    steps by Woodbury (``HeadOps.step``). The head's form (``HeadOps``) is
    chosen once per call from ``state.lazy_head`` (``head_ops``).

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
        with ``shuffle`` False: the block is a set of rows).
    n_epochs, shuffle : int, bool
        Passes over the rows; whether each starts with a shuffle.

    Returns
    -------
    result : SBMResult
    """
    if opts.surrogate:
        raise ValueError("the surrogate update is implemented for full rank only")
    cdef Py_ssize_t stop_ = check_rows(ds, state, start, stop)
    if shuffle and (start, stop_) != (0, ds.n_samples):
        raise ValueError("a block of rows (start:stop) is passed in its order: "
                         "shuffle must be False")
    # the head's weights during the passes (written back at the end)
    theta_head = state.theta[state.head_coords]
    cdef LowRankKernel kr
    cdef LowRank lr
    cdef Head hd
    cdef Workspace ws = Workspace()
    bind_lowrank(&kr, &lr, &hd, ws, state, opts, theta_head)
    cdef Py_ssize_t i
    kr.n_steps = 0
    for i in range(start, stop_):
        if ds.sample_weight[ds.order_ptr[i]] != 0.0:
            kr.n_steps += 1
    cdef Example ex
    cdef RowParts rp
    example_init(&ex, ws, kr.n_features, kr.K)
    parts_init(&rp, ws, kr.n_features, kr.H, kr.K)
    lr.zi = rp.zidx
    lr.nzi = 0
    cdef HeadOps ops = head_ops(kr.lazy_head)
    cdef int _epoch, epochs_run = 0
    cdef bint diverged = False
    cdef unsigned int rng = state.rng_state()
    cdef PassTotals tot = start_totals(state.t)
    with nogil:
        for _epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            if not lowrank_pass(ds, start, stop_, &kr, &ops, &lr, &hd, &ex, &rp, &tot):
                diverged = True
                break
            if not all_finite(kr.theta, kr.P) or (kr.H > 0 and not all_finite(hd.th, kr.H)):
                diverged = True          # (reported as pass epochs_run + 1)
                break
            epochs_run += 1
    state.theta[state.head_coords] = theta_head
    if kr.lazy_head:
        state.D_head[:] = lr.delta
    return finish_passes(state, tot, rng, epochs_run, diverged)


cdef int bind_lowrank(LowRankKernel* kr, LowRank* lr, Head* hd, Workspace ws, state, opts,
                      theta_head) except -1:
    """The kernel's view of ``state`` (its arrays) and ``opts``; ``lr`` and
    ``hd`` on the head's arrays, with their scratch from ``ws``."""
    cdef double[::1] theta = state.theta
    cdef double[::1] mu = state.mu
    cdef double[::1] D = state.D
    cdef double[::1] th_h = theta_head
    cdef double[::1] mu_h = state.mu_head
    cdef double[::1] D_h = state.D_head
    cdef double[:, ::1] V = state.V
    cdef double[:, ::1] S = state.S
    cdef const int[::1] head_slot = state.head_slot
    cdef long long[::1] tau = state.tau
    cdef Py_ssize_t d = state.n_features
    memset(lr, 0, sizeof(LowRank))
    memset(hd, 0, sizeof(Head))
    kr.K = hd.K = state.n_outputs
    kr.n_features = d
    kr.fit_intercept = state.fit_intercept
    kr.P = <int>((d + (1 if kr.fit_intercept else 0)) * kr.K)
    kr.H = lr.H = hd.H = <int>th_h.shape[0]
    lr.k = hd.k = <int>S.shape[0]
    if theta.shape[0] != kr.P or mu.shape[0] != kr.P or D.shape[0] != kr.P:
        raise ValueError("theta / mu / D do not match the data shape")
    if (mu_h.shape[0] != kr.H or D_h.shape[0] != kr.H or V.shape[0] != lr.k + 1
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
    kr.head_slot = &head_slot[0]
    kr.theta = &theta[0]
    kr.mu = &mu[0]
    kr.D = &D[0]
    kr.tau = &tau[0] if d > 0 else NULL
    hd.th = &th_h[0] if kr.H > 0 else NULL
    hd.mu = &mu_h[0] if kr.H > 0 else NULL
    lr.V = &V[0, 0] if kr.H > 0 else NULL
    lr.S = &S[0, 0] if lr.k > 0 else NULL
    lr.Dh = &D_h[0] if kr.H > 0 else NULL
    lr.delta = float(np.max(state.D_head)) if kr.H > 0 else state.lam
    lowrank_scratch(lr, ws)
    head_init(hd, ws, lr.k, kr.H)
    return 0


# ----------------------------------------------------------------------------
# test hook (those of the bound: _sbm_lowrank_bound)
# ----------------------------------------------------------------------------
def advance_py(double th, double mu, double c, double alpha, long long tau, long long t,
               long long b, long long n):
    """``advance_tail`` on one coordinate (test hook): returns ``(th, mu)``."""
    advance_tail(&th, &mu, c, alpha, tau, t, b, n)
    return th, mu
