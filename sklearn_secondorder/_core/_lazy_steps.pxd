# The lazy state of Periodic Step-size Adaptation (Hsu et al., Algorithm 1):
# one record per block of weights, one event walk.
#
# Dense, every step t updates every weight and every b steps an event
# applies to all of them:
#
#     theta_p(t+1) = (1 - eta_p lam) theta_p(t) - eta_p g_p(t)      (line 5)
#     at t = b, 3b, 5b, ...: the mid-window snapshot theta(t+b)
#     at t = 2b, 4b, ...:    eta_p *= f(gamma_p) (Eqs. 6-9), the window restarts
#
# Lazily, a weight untouched by the rows only decays, with eta constant between
# two events, so a block of weights is brought to time T when it is next read
# (catch_up): k idle steps are one factor exp(k log(1 - eta lam)), each event
# crossed is applied in turn, and whole idle windows are one closed form.
#
# A block's record and its fields: _lazy_records.pxd.
#
# The functions are inline, over fused types, so that each kernel compiles
# one specialisation per (penalty, rate rule) pair: whether there is an L1
# penalty and how a decay's log-rate is obtained are chosen once per kernel
# call, not tested per weight. (Inline functions shared by two kernels live
# in the .pxd: that is where Cython can inline them from.)

from libc.math cimport copysign, exp, expm1, fabs, isfinite, log1p

from ._binary_gaps cimport GapConsts, binary_gaps
from ._block_ops cimport (
    block_decay_end_event,
    block_decay_mid_event,
    block_decay_series,
    block_end_event,
    block_idle_windows,
    block_mid_event,
)
from ._lazy_records cimport Block, Layout, block_at, shift, width_of
from ._psa_math cimport (
    EXP_NEG4_MAX,
    EXPM1_POLY_MAX,
    TAYLOR_MAX,
    decay_taylor,
    expm1_poly,
    l1_apply,
    log_decay_series,
    one_minus_decay,
    psa_factor_of_ratio,
)
from ._shared_state cimport owner_of


# Whether the state carries the L1 penalty's debts.
ctypedef struct L2Only:
    char _unused

ctypedef struct WithL1:
    char _unused

ctypedef fused Penalty:
    L2Only
    WithL1


# How a decay's log-rate log(1 - eta lam) is obtained: its series when every
# eta lam < SERIES_RATE_MAX (then for the state's lifetime: eta only
# decreases), log1p otherwise; decided once, by make_core (LazyCore.series).
ctypedef struct SeriesRate:
    char _unused

ctypedef struct Log1pRate:
    char _unused

ctypedef fused RateRule:
    SeriesRate
    Log1pRate


ctypedef struct LazyCore:
    # the constants of one kernel call
    long long b          # the period; 0: no adaptation (events never happen)
    double inv_b         # 1 / b (floor_div)
    double lam           # L2 strength of the regularised blocks
    double l1            # L1 strength C (WithL1 only)
    double m, kappa, inv_denom, f_lo, f_hi    # Eqs. (9)-(10)
    double log_alpha     # log(psa_alpha)
    double eta_clip      # (1 - eta lam)^b >= kappa  <=>  eta <= eta_clip
    double rate_max      # -log(1 - eta lam) of the largest eta at the call's start
    double inv_geo[41]   # 1 / (m (1 - alpha^m)), m = 1..40 (the idle windows' series)
    bint clipped         # every eta <= eta_clip at the call's start (so for all of it)
    # the specialisation of the call's passes (_lazy_pick.pxi): whether the
    # state carries the L1 penalty's debts, and whether every eta lam is
    # below SERIES_RATE_MAX at the call's start (so for all of it: eta only
    # decreases), which takes the series rate rule
    bint with_l1
    bint series


cdef LazyCore make_core(options, state) except *
cdef Layout layout_of(state) except *


cdef inline bint gaps_apply(const LazyCore* c, const Layout* L) noexcept nogil:
    """Whether a binary state's touches can take ``binary_gaps`` (the L2
    penalty alone under the series rate rule is the caller's; here: events,
    the L2 penalty and the clipped regime)."""
    return L.K == 1 and L.record_at == NULL and c.b > 0 and c.lam > 0.0 and c.clipped


cdef inline GapConsts gap_consts(const LazyCore* c, const Layout* L) noexcept nogil:
    """``binary_gaps``' constants."""
    cdef GapConsts g
    g.b, g.inv_b, g.lam, g.rate_max = <double>c.b, c.inv_b, c.lam, c.rate_max
    g.log_alpha, g.g1, g.g2 = c.log_alpha, c.inv_geo[1], c.inv_geo[2]
    g.m, g.kappa, g.inv_denom, g.f_lo, g.f_hi = c.m, c.kappa, c.inv_denom, c.f_lo, c.f_hi
    g.stride, g.off_v, g.off_eta = L.stride, L.off_v, L.off_eta
    g.off_dsnap, g.off_snap = L.off_dsnap, L.off_snap
    return g


cdef inline long long floor_div(long long x, const LazyCore* c) noexcept nogil:
    """``x // b`` for ``0 <= x < 2^52``, by a multiplication (an integer
    division costs tens of cycles, and a catch-up needs one)."""
    cdef long long q = <long long>(<double>x * c.inv_b)
    if q * c.b > x:
        q -= 1
    elif (q + 1) * c.b <= x:
        q += 1
    return q


cdef inline long long last_event(const LazyCore* c, long long T) noexcept nogil:
    """The latest event time ``<= T`` (-1 without events): a block current at
    ``tau`` has events to cross iff ``tau < last_event(T)``."""
    if c.b == 0:
        return -1
    return floor_div(T, c) * c.b


cdef inline double log_rate(const RateRule* rule, double x) noexcept nogil:
    """``log(1 - x)``, ``x = eta lam >= 0`` (``-1e300`` when ``x >= 1``: the
    step's factor ``max(0, 1 - eta lam)`` is 0)."""
    if RateRule is SeriesRate:
        return log_decay_series(x)
    else:
        if x >= 1.0:
            return -1e300
        return log1p(-x)


cdef inline double decay_exp(double z) noexcept nogil:
    """``exp(z)`` for ``z <= 0``: Taylor polynomials where they are exact to
    rounding (``|z| < TAYLOR_MAX``: to ``z^4``; ``|z| <= EXPM1_POLY_MAX``: to
    ``z^8``),
    libm's otherwise."""
    if z > -TAYLOR_MAX:
        return decay_taylor(z)
    if z >= -EXPM1_POLY_MAX:
        return 1.0 + expm1_poly(z)
    return exp(z)


cdef inline double decay_expm1(double z) noexcept nogil:
    """``exp(z) - 1`` for ``z <= 0`` (``decay_exp``'s ranges)."""
    if z >= -EXPM1_POLY_MAX:
        return expm1_poly(z)
    return expm1(z)


cdef inline void l1_clip(Block b, Py_ssize_t q) noexcept nogil:
    """Tsuruoka's clip of weight ``q`` with what it is owed
    (``skso_l1_apply``); the change is recorded as applied."""
    cdef double z = b.v[q], nv = l1_apply(b.v[q], b.owed_down[q], b.owed_up[q])
    b.owed_down[q] += nv - z
    b.owed_up[q] -= nv - z
    b.v[q] = nv


cdef inline void l1_owe(Block b, Py_ssize_t q, double f, double owed) noexcept nogil:
    """Steps whose L2 factor is ``f`` and penalty ``owed``: what weight ``q``
    is owed shrinks with it, then grows by ``owed``."""
    b.owed_down[q] = b.owed_down[q] * f + owed
    b.owed_up[q] = b.owed_up[q] * f + owed


cdef inline void decay(Block b, Py_ssize_t n, long long k, double lam, double l1,
                       const LazyCore* c, const Penalty* pen,
                       const RateRule* rule) noexcept nogil:
    """``k >= 0`` idle steps of ``n`` weights at a constant eta: ``v *= (1 -
    eta lam)^k``; with the L1 penalty also the steps' penalty, the geometric
    sum ``C/lam (1 - (1 - eta lam)^k)`` (``k eta C`` without L2), then the
    clip. A wide block under the series rule whose ``|k log(1 - eta lam)|``
    are at most 4 (bounded by the call's largest rate) takes a vector loop
    over its weights (``_block_ops.h``); a binary weight takes
    ``decay_exp``."""
    cdef Py_ssize_t q
    cdef double z, f, bound = <double>k * c.rate_max
    if Penalty is L2Only:
        if lam == 0.0:
            return
        if RateRule is SeriesRate and n > 1 and bound <= EXP_NEG4_MAX:
            block_decay_series(b.v, b.eta, lam, <double>k, bound, n)   # (vector loops)
            return
        if bound < TAYLOR_MAX:
            for q in range(n):
                b.v[q] *= decay_taylor(<double>k * log_rate(rule, b.eta[q] * lam))
        else:
            for q in range(n):
                b.v[q] *= decay_exp(<double>k * log_rate(rule, b.eta[q] * lam))
    else:
        if lam == 0.0 and l1 == 0.0:
            return
        for q in range(n):
            if lam == 0.0:
                l1_owe(b, q, 1.0, l1 * b.eta[q] * <double>k)
            else:
                z = <double>k * log_rate(rule, b.eta[q] * lam)
                f = decay_exp(z)
                b.v[q] *= f
                l1_owe(b, q, f, l1 / lam * one_minus_decay(z))
            l1_clip(b, q)


cdef inline double psa_factor(double num, double den, const LazyCore* c) noexcept nogil:
    """PSA's step-size factor (Eqs. 6-9) from ``num = w(t+2b) - w(t+b)`` and
    ``den = w(t+b) - w(t)``; 0 for ``0/0`` (no curvature information: keep
    eta). A weight that moved only in the second half (``den = 0``) gets
    ``u = sign(num) kappa``, the limit of the ratio."""
    cdef double f, u
    if den == 0.0 and num == 0.0:
        return 0.0
    if fabs(num) >= c.kappa * fabs(den):
        # |u| >= kappa, clipped to +-kappa (Eq. 7) without the division: an
        # idle weight's ratio is its decay, near 1
        u = c.kappa if (num > 0.0) == (copysign(1.0, den) > 0.0) else -c.kappa
    else:
        u = num / den
    f = psa_factor_of_ratio(u, c.m, c.kappa, c.inv_denom, c.f_lo, c.f_hi)
    return 0.0 if f != f else f


cdef inline void apply_event(Block b, Py_ssize_t n, bint mid_window,
                             const LazyCore* c) noexcept nogil:
    """The event at time ``q b`` on ``n`` weights current then: the
    mid-window snapshot (``mid_window``: ``q`` odd), or the window end: the
    step-size update (Eq. 8) and the new window's first snapshot."""
    cdef Py_ssize_t q
    cdef double f
    if n > 1:                  # (a wide block: the same arithmetic as vector loops)
        if mid_window:
            block_mid_event(b.v, b.snap, b.dsnap, n)
        else:
            block_end_event(b.v, b.snap, b.dsnap, b.eta, c.m, c.kappa, c.inv_denom, c.f_lo,
                            c.f_hi, n)
    elif mid_window:
        for q in range(n):
            b.dsnap[q] = <float>(b.v[q] - b.snap[q])
            b.snap[q] = b.v[q]
    else:
        for q in range(n):
            f = psa_factor(b.v[q] - b.snap[q], b.dsnap[q], c)
            if f != 0.0:
                b.eta[q] = <float>(b.eta[q] * f)
            b.snap[q] = b.v[q]


cdef inline double idle_log_decay(double x, double p1, const LazyCore* c,
                                  const RateRule* rule) noexcept nogil:
    """``sum_{i < k} log(1 - x alpha^i)``: the log-decay per step of ``k``
    idle windows in the clipped regime (the factor is ``alpha`` in each), as
    the series ``-sum_m x^m / m (1 - A^m) / (1 - alpha^m)``, ``A = alpha^k =
    1 - p1`` (``1 - A^m`` by ``P_m = P_(m-1) A + P_1``, without
    cancellation). With the series rate rule (``x < SERIES_RATE_MAX``) two terms: the
    rest is below ``x^2 / 3 < 3.4e-9`` of the sum."""
    cdef double a = 1.0 - p1, pm = p1, xm = 1.0, term, total = 0.0
    cdef int mm
    if RateRule is SeriesRate:
        total = x * p1 * (c.inv_geo[1] + x * (2.0 - p1) * c.inv_geo[2])
    else:
        for mm in range(1, 41):
            xm *= x
            if mm > 1:
                pm = pm * a + p1
            term = xm * pm * c.inv_geo[mm]
            total += term
            if term < 1e-17 * total:
                break
    return -total


cdef inline void replay_window(Block b, double lam, double l1, const LazyCore* c,
                               const Penalty* pen, const RateRule* rule) noexcept nogil:
    """One idle window of one weight (a block of one), from its start: decay,
    the mid-window snapshot, decay, the window end."""
    decay(b, 1, c.b, lam, l1, c, pen, rule)
    apply_event(b, 1, True, c)
    decay(b, 1, c.b, lam, l1, c, pen, rule)
    apply_event(b, 1, False, c)


cdef inline void idle_windows(Block b, Py_ssize_t n, long long n_win, double lam, double l1,
                              const LazyCore* c, const Penalty* pen,
                              const RateRule* rule) noexcept nogil:
    """``n_win >= 1`` whole idle windows of ``n`` weights, from a window start.

    A zero weight stays 0 and keeps eta (0/0). A non-zero weight moves only
    by the decay, so its ratio is ``(1 - eta lam)^b``; once that is at least
    kappa (``eta <= eta_clip``) the factor is alpha in this window and every
    later one (eta only decreases), so the windows are ``eta *= alpha^n_win``
    and one decay (``idle_log_decay``); before that they are replayed. With
    the L1 penalty a weight also moves by its penalty: its windows are
    replayed until it reaches 0, the rest are the zero case (the debt
    grows by one geometric sum).
    """
    cdef Py_ssize_t q
    cdef long long left
    cdef double p1 = -decay_expm1(<double>n_win * c.log_alpha), p1_left = <double>n_win
    cdef double two_b = 2.0 * <double>c.b
    if Penalty is L2Only and RateRule is SeriesRate:
        # a wide block, every weight clipped, its decay's exponent at most 4
        # (bounded by the call's largest rate): one vector loop
        if (n > 1 and lam != 0.0 and c.clipped
                and two_b * c.rate_max * p1 * (c.inv_geo[1] + 2.0 * c.rate_max * c.inv_geo[2])
                <= EXP_NEG4_MAX):
            block_idle_windows(b.v, b.eta, b.snap, lam, p1, two_b, c.inv_geo[1], c.inv_geo[2], n)
            return
    for q in range(n):
        left = n_win
        if Penalty is L2Only:
            if lam == 0.0:
                return         # (v does not move: 0/0 keeps eta; snap == v already)
            while left > 0 and b.v[q] != 0.0 and b.eta[q] > c.eta_clip:
                replay_window(shift(b, q), lam, l1, c, pen, rule)
                left -= 1
            if left > 0 and b.v[q] != 0.0:
                if left != p1_left:
                    p1, p1_left = -decay_expm1(<double>left * c.log_alpha), left
                b.v[q] *= decay_exp(2.0 * <double>c.b *
                                    idle_log_decay(b.eta[q] * lam, p1, c, rule))
                b.eta[q] = <float>(b.eta[q] * (1.0 - p1))
                b.snap[q] = b.v[q]
        else:
            while left > 0 and b.v[q] != 0.0:
                replay_window(shift(b, q), lam, l1, c, pen, rule)
                left -= 1
            if left > 0:
                decay(shift(b, q), 1, 2 * c.b * left, lam, l1, c, pen, rule)


cdef inline bint still(Block b, Py_ssize_t n) noexcept nogil:
    """Whether every weight of a block is 0 with zero snapshots (most blocks
    of a large model: features no row has touched yet)."""
    cdef Py_ssize_t q
    for q in range(n):
        if b.v[q] != 0.0 or b.snap[q] != 0.0 or b.dsnap[q] != 0.0:
            return False
    return True


cdef inline void walk(Block b, Py_ssize_t n, long long tau, long long T, double lam,
                      double l1, const LazyCore* c, const Penalty* pen,
                      const RateRule* rule) noexcept nogil:
    """``n`` weights current at ``tau`` to ``T``: the decays and every event
    in ``(tau, T]`` (the ``q``-th at ``q b``), whole idle windows in closed
    form. Each event is decided once for the ``n`` weights."""
    cdef long long bb = c.b, q = floor_div(tau, c) + 1, n_win
    cdef double bound
    while q * bb <= T:
        bound = <double>(q * bb - tau) * c.rate_max
        if (Penalty is L2Only and RateRule is SeriesRate and n > 1 and lam != 0.0
                and bound <= EXP_NEG4_MAX):
            # a wide block: the decay and the event in one vector loop
            if q & 1:
                block_decay_mid_event(b.v, b.eta, b.snap, b.dsnap, lam, <double>(q * bb - tau),
                                      bound, n)
            else:
                block_decay_end_event(b.v, b.eta, b.snap, b.dsnap, lam, <double>(q * bb - tau),
                                      bound, c.m, c.kappa, c.inv_denom, c.f_lo, c.f_hi, n)
        else:
            decay(b, n, q * bb - tau, lam, l1, c, pen, rule)
            apply_event(b, n, q & 1, c)
        tau = q * bb
        if (q & 1) == 0 and T - tau >= 2 * bb:
            n_win = floor_div(T - tau, c) // 2
            idle_windows(b, n, n_win, lam, l1, c, pen, rule)
            tau += 2 * bb * n_win
            q += 2 * n_win
        q += 1
    decay(b, n, T - tau, lam, l1, c, pen, rule)


cdef inline void catch_up(Block b, Py_ssize_t n, long long T, double lam, double l1,
                          const LazyCore* c, const Penalty* pen,
                          const RateRule* rule) noexcept nogil:
    """Bring a block of ``n`` weights to time ``T`` (``walk``). ``lam`` and
    ``l1`` are the block's (0 for an unregularised intercept). A binary
    weight walks with ``n = 1`` a constant, its state in registers."""
    cdef long long tau = b.last[0]
    if still(b, n):
        # nothing moves and every event is 0/0 (eta kept): only the L1 debt
        # of the weights grows (one geometric sum, eta constant)
        if Penalty is WithL1:
            decay(b, n, T - tau, lam, l1, c, pen, rule)
    elif c.b == 0:
        decay(b, n, T - tau, lam, l1, c, pen, rule)
    elif n == 1:
        walk(b, 1, tau, T, lam, l1, c, pen, rule)
    else:
        walk(b, n, tau, T, lam, l1, c, pen, rule)
    b.last[0] = T


cdef inline bint flush_block(const Layout* L, Py_ssize_t j, bint regularized, long long T,
                             const LazyCore* c, const Penalty* pen,
                             const RateRule* rule) noexcept nogil:
    """Block ``j`` to ``T`` (without penalty unless ``regularized``), a
    kernel's flush at the end of a pass; whether its weights are finite.
    Most blocks of a large model are still (no row touched them): the
    check is the whole cost for them."""
    cdef Py_ssize_t k, K = width_of(L, j)
    cdef Block b = block_at(L, j)
    cdef bint finite = True
    if Penalty is L2Only and still(b, K):
        b.last[0] = T
        return True
    if regularized:
        catch_up(b, K, T, c.lam, c.l1, c, pen, rule)
    else:
        catch_up(b, K, T, 0.0, 0.0, c, pen, rule)
    for k in range(K):
        finite &= isfinite(b.v[k])
    return finite


cdef inline bint catch_up_all(const Layout* L, Py_ssize_t n_blocks, Py_ssize_t unregularized,
                              long long T, const LazyCore* c, const Penalty* pen,
                              const RateRule* rule, int k=0, int n_threads=1,
                              int line_shift=0) noexcept nogil:
    """Every block to ``T`` (``flush_block``; block ``unregularized``
    without penalty), or with ``n_threads > 1`` every block thread ``k``
    owns (``owner_of``); whether every weight is finite. A binary state in
    the regime of ``binary_gaps`` lists the blocks to bring, 256 at a time,
    and brings them eight at a time."""
    cdef Py_ssize_t j, j0, q, m, n_left
    cdef bint finite = True
    cdef int listed[256]
    cdef int left[256]
    cdef GapConsts gc
    cdef Block b
    if Penalty is L2Only and RateRule is SeriesRate:
        if gaps_apply(c, L):
            gc = gap_consts(c, L)
            for j0 in range(0, n_blocks, 256):
                m = 0
                for j in range(j0, min(j0 + 256, n_blocks)):
                    if n_threads > 1 and owner_of(j, unregularized, line_shift, n_threads) != k:
                        continue
                    b = block_at(L, j)
                    if j == unregularized:
                        finite &= flush_block(L, j, False, T, c, pen, rule)
                    elif b.last[0] == T or still(b, 1):
                        b.last[0] = T
                        finite &= isfinite(b.v[0])
                    else:
                        listed[m] = <int>j
                        m += 1
                n_left = binary_gaps(L.base, listed, m, <double>T,
                                     <double>last_event(c, T), &gc, left)
                for q in range(n_left):
                    finite &= flush_block(L, left[q], True, T, c, pen, rule)
                for q in range(m):
                    finite &= isfinite(block_at(L, listed[q]).v[0])
            return finite
    for j in range(n_blocks):
        if n_threads == 1 or owner_of(j, unregularized, line_shift, n_threads) == k:
            finite &= flush_block(L, j, j != unregularized, T, c, pen, rule)
    return finite


cdef inline void touch(Block b, Py_ssize_t n, long long T, long long ev, double lam,
                       double l1, const LazyCore* c, const Penalty* pen,
                       const RateRule* rule) noexcept nogil:
    """``catch_up`` with its common case inlined: no event to cross
    (``ev = last_event(T)``), one decay."""
    cdef long long tau = b.last[0]
    if tau < ev:
        catch_up(b, n, T, lam, l1, c, pen, rule)
    elif tau != T:
        decay(b, n, T - tau, lam, l1, c, pen, rule)
        b.last[0] = T


cdef inline void step_weight(Block b, Py_ssize_t q, double lam, double l1, double g,
                             const Penalty* pen) noexcept nogil:
    """One update of weight ``q``, ``theta <- max(0, 1 - eta lam) theta - eta
    g`` (Algorithm 1, line 5); with the L1 penalty the step's ``eta C`` is
    owed and the weight clipped."""
    cdef double e = b.eta[q], f = 1.0 - e * lam
    if f < 0.0:
        f = 0.0
    b.v[q] = f * b.v[q] - e * g
    if Penalty is WithL1:
        l1_owe(b, q, f, e * l1)
        l1_clip(b, q)
