# The lazy state of Periodic Step-size Adaptation (Hsu et al., Algorithm 1):
# one record per weight, one event walk.
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
# A block (one feature's n_outputs weights, a CRF attribute's n_states) is a
# run of contiguous records; its first record's `last` is the time the block
# is current at, and every event at a time <= last has been applied to it.
# The record holds what a touch reads and writes, so a touch loads one
# record: 32 bytes (StepRecord) or 64 with the L1 penalty (StepRecordL1),
# two or one to a cache line, the arrays aligned on 64 bytes (the Python
# side, _lazy_steps.pyx, allocates them).
#
# The functions are inline, over fused types, so that each kernel compiles
# one specialisation per (record, rate rule) pair: whether there is an L1
# penalty and how a decay's log-rate is obtained are chosen once per kernel
# call, not tested per weight. (Inline functions shared by two kernels live
# in the .pxd: that is where Cython can inline them from.)

cdef extern from "_psa_math.h":
    double decay_taylor "skso_decay_taylor"(double z) noexcept nogil
    double expm1_poly "skso_expm1_poly"(double z) noexcept nogil
    double log_decay_series "skso_log_decay_series"(double x) noexcept nogil
    double psa_factor_of_ratio "skso_psa_factor"(double u, double m, double kappa,
                                                 double inv_denom, double f_lo,
                                                 double f_hi) noexcept nogil
    double one_minus_decay "skso_one_minus_decay"(double z) noexcept nogil
    double l1_apply "skso_l1_apply"(double w, double owed_down, double owed_up) noexcept nogil

from libc.math cimport exp, expm1, isfinite, log1p


ctypedef struct StepRecord:
    double v             # the weight, current at its block's `last`
    double snap          # the weight at the last event (window start or mid-window)
    float eta            # the step size (float32: a factor in [beta, alpha] per window)
    float dsnap          # theta(t+b) - theta(t), the current window's first half
    long long last       # (a block's first record) the time the block is current at


ctypedef struct StepRecordL1:
    double v
    double snap
    float eta
    float dsnap
    long long last
    # the cumulative L1 penalty (Tsuruoka et al. 2009) in the weight's units:
    # what it is owed, u + q towards 0 from above and u - q from below (u the
    # total of its own steps' eta C, q what was applied)
    double owed_down
    double owed_up
    double _pad[2]       # (64 bytes: one cache line)


ctypedef fused Record:
    StepRecord
    StepRecordL1


# How a decay's log-rate log(1 - eta lam) is obtained: its series when every
# eta lam < 1e-4 (then for the state's lifetime: eta only decreases), log1p
# otherwise.
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
    double l1            # L1 strength C (StepRecordL1 only)
    double m, kappa, inv_denom, f_lo, f_hi    # Eqs. (9)-(10)
    double log_alpha     # log(psa_alpha)
    double eta_clip      # (1 - eta lam)^b >= kappa  <=>  eta <= eta_clip
    double inv_geo[41]   # 1 / (m (1 - alpha^m)), m = 1..40 (the idle windows' series)


cdef LazyCore make_core(options) except *


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
    rounding (``|z| < 5e-4``: to ``z^4``; ``|z| <= 1/16``: to ``z^10``),
    libm's otherwise."""
    if z > -5e-4:
        return decay_taylor(z)
    if z >= -0.0625:
        return 1.0 + expm1_poly(z)
    return exp(z)


cdef inline double decay_expm1(double z) noexcept nogil:
    """``exp(z) - 1`` for ``z <= 0`` (``decay_exp``'s ranges)."""
    if z >= -0.0625:
        return expm1_poly(z)
    return expm1(z)


cdef inline void l1_clip(StepRecordL1* r) noexcept nogil:
    """Tsuruoka's clip of a weight with what it is owed (``skso_l1_apply``);
    the change is recorded as applied."""
    cdef double z = r.v, nv = l1_apply(r.v, r.owed_down, r.owed_up)
    r.owed_down += nv - z
    r.owed_up -= nv - z
    r.v = nv


cdef inline void l1_owe(StepRecordL1* r, double f, double owed) noexcept nogil:
    """Steps whose L2 factor is ``f`` and penalty ``owed``: what the weight is
    owed shrinks with it, then grows by ``owed``."""
    r.owed_down = r.owed_down * f + owed
    r.owed_up = r.owed_up * f + owed


cdef inline void decay(Record* r, Py_ssize_t n, long long k, double lam, double l1,
                       const RateRule* rule) noexcept nogil:
    """``k >= 0`` idle steps of ``n`` weights at a constant eta: ``v *= (1 -
    eta lam)^k``; with the L1 penalty also the steps' penalty, the geometric
    sum ``C/lam (1 - (1 - eta lam)^k)`` (``k eta C`` without L2), then the
    clip."""
    cdef Py_ssize_t q
    cdef double z, f
    if Record is StepRecord:
        if lam == 0.0:
            return
        for q in range(n):
            r[q].v *= decay_exp(<double>k * log_rate(rule, r[q].eta * lam))
    else:
        if lam == 0.0 and l1 == 0.0:
            return
        for q in range(n):
            if lam == 0.0:
                l1_owe(&r[q], 1.0, l1 * r[q].eta * <double>k)
            else:
                z = <double>k * log_rate(rule, r[q].eta * lam)
                f = decay_exp(z)
                r[q].v *= f
                l1_owe(&r[q], f, l1 / lam * one_minus_decay(z))
            l1_clip(&r[q])


cdef inline double psa_factor(double num, double den, const LazyCore* c) noexcept nogil:
    """PSA's step-size factor (Eqs. 6-9) from ``num = w(t+2b) - w(t+b)`` and
    ``den = w(t+b) - w(t)``; 0 for ``0/0`` (no curvature information: keep
    eta). A weight that moved only in the second half (``den = 0``) gets
    ``u = sign(num) kappa``, the limit of the ratio."""
    cdef double f
    if den == 0.0 and num == 0.0:
        return 0.0
    f = psa_factor_of_ratio(num / den, c.m, c.kappa, c.inv_denom, c.f_lo, c.f_hi)
    return 0.0 if f != f else f


cdef inline void apply_event(Record* r, Py_ssize_t n, bint mid_window,
                             const LazyCore* c) noexcept nogil:
    """The event at time ``q b`` on ``n`` weights current then: the
    mid-window snapshot (``mid_window``: ``q`` odd), or the window end: the
    step-size update (Eq. 8) and the new window's first snapshot."""
    cdef Py_ssize_t q
    cdef double f
    if mid_window:
        for q in range(n):
            r[q].dsnap = <float>(r[q].v - r[q].snap)
            r[q].snap = r[q].v
    else:
        for q in range(n):
            f = psa_factor(r[q].v - r[q].snap, r[q].dsnap, c)
            if f != 0.0:
                r[q].eta = <float>(r[q].eta * f)
            r[q].snap = r[q].v


cdef inline double idle_log_decay(double x, double p1, const LazyCore* c,
                                  const RateRule* rule) noexcept nogil:
    """``sum_{i < k} log(1 - x alpha^i)``: the log-decay per step of ``k``
    idle windows in the clipped regime (the factor is ``alpha`` in each), as
    the series ``-sum_m x^m / m (1 - A^m) / (1 - alpha^m)``, ``A = alpha^k =
    1 - p1`` (``1 - A^m`` by ``P_m = P_(m-1) A + P_1``, without
    cancellation). With the series rate rule (``x < 1e-4``) two terms: the
    rest is below ``x^2 / 3 < 3.4e-9`` of the sum."""
    cdef double a = 1.0 - p1, pm = p1, xm = 1.0, term, total = 0.0
    cdef int mm
    if RateRule is SeriesRate:
        return -x * p1 * (c.inv_geo[1] + x * (2.0 - p1) * c.inv_geo[2])
    for mm in range(1, 41):
        xm *= x
        if mm > 1:
            pm = pm * a + p1
        term = xm * pm * c.inv_geo[mm]
        total += term
        if term < 1e-17 * total:
            break
    return -total


cdef inline void replay_window(Record* r, double lam, double l1, const LazyCore* c,
                               const RateRule* rule) noexcept nogil:
    """One idle window of one weight, from its start: decay, the mid-window
    snapshot, decay, the window end."""
    decay(r, 1, c.b, lam, l1, rule)
    apply_event(r, 1, True, c)
    decay(r, 1, c.b, lam, l1, rule)
    apply_event(r, 1, False, c)


cdef inline void idle_windows(Record* r, Py_ssize_t n, long long n_win, double lam, double l1,
                              const LazyCore* c, const RateRule* rule) noexcept nogil:
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
    cdef double p1 = 0.0, p1_left = 0.0     # 1 - alpha^left, for the last left seen
    for q in range(n):
        left = n_win
        if Record is StepRecord:
            if lam == 0.0:
                continue       # (v does not move: 0/0 keeps eta; snap == v already)
            while left > 0 and r[q].v != 0.0 and r[q].eta > c.eta_clip:
                replay_window(&r[q], lam, l1, c, rule)
                left -= 1
            if left > 0 and r[q].v != 0.0:
                if left != p1_left:
                    p1, p1_left = -decay_expm1(<double>left * c.log_alpha), left
                r[q].v *= decay_exp(2.0 * <double>c.b *
                                    idle_log_decay(r[q].eta * lam, p1, c, rule))
                r[q].eta = <float>(r[q].eta * (1.0 - p1))
                r[q].snap = r[q].v
        else:
            while left > 0 and r[q].v != 0.0:
                replay_window(&r[q], lam, l1, c, rule)
                left -= 1
            if left > 0:
                decay(&r[q], 1, 2 * c.b * left, lam, l1, rule)


cdef inline bint still(const Record* r, Py_ssize_t n) noexcept nogil:
    """Whether every weight of a block is 0 with zero snapshots (most blocks
    of a large model: features no row has touched yet)."""
    cdef Py_ssize_t q
    for q in range(n):
        if r[q].v != 0.0 or r[q].snap != 0.0 or r[q].dsnap != 0.0:
            return False
    return True


cdef inline void walk(Record* r, long long tau, long long q, long long T, double lam,
                      double l1, const LazyCore* c, const RateRule* rule) noexcept nogil:
    """One weight from time ``tau`` to ``T``: the decays and every event from
    the ``q``-th (at ``q b > tau``) up to ``T``, whole idle windows in closed
    form (``catch_up``, a weight at a time: its state stays in registers)."""
    cdef long long b = c.b, n_win
    while q * b <= T:
        decay(r, 1, q * b - tau, lam, l1, rule)
        tau = q * b
        apply_event(r, 1, q & 1, c)
        if (q & 1) == 0 and T - tau >= 2 * b:
            n_win = floor_div(T - tau, c) // 2
            idle_windows(r, 1, n_win, lam, l1, c, rule)
            tau += 2 * b * n_win
            q += 2 * n_win
        q += 1
    decay(r, 1, T - tau, lam, l1, rule)


cdef inline void catch_up(Record* r, Py_ssize_t n, long long T, double lam, double l1,
                          const LazyCore* c, const RateRule* rule) noexcept nogil:
    """Bring a block of ``n`` records to time ``T``: the decays and every
    event in ``(last, T]`` (the ``q``-th at ``q b``), whole idle windows in
    closed form (``walk``). ``lam`` and ``l1`` are the block's (0 for an
    unregularised intercept)."""
    cdef long long tau = r[0].last, q
    cdef Py_ssize_t p
    if still(r, n):
        # nothing moves and every event is 0/0 (eta kept): only the L1 debt
        # of the weights grows (one geometric sum, eta constant)
        if Record is StepRecordL1:
            decay(r, n, T - tau, lam, l1, rule)
        r[0].last = T
        return
    if c.b == 0:
        decay(r, n, T - tau, lam, l1, rule)
    else:
        q = floor_div(tau, c) + 1
        for p in range(n):
            walk(&r[p], tau, q, T, lam, l1, c, rule)
    r[0].last = T


cdef inline bint catch_up_all(Record* rec, Py_ssize_t n_blocks, Py_ssize_t K,
                              Py_ssize_t unregularized, long long T, const LazyCore* c,
                              const RateRule* rule) noexcept nogil:
    """Every block to ``T`` (block ``unregularized`` without penalty), the
    kernels' flush at the end of a pass; whether every weight is finite.
    Most blocks of a large model are still (no row touched them): the
    check is the loop's whole cost for them."""
    cdef Py_ssize_t j, k
    cdef Record* r
    cdef bint finite = True
    for j in range(n_blocks):
        r = rec + j * K
        if Record is StepRecord and still(r, K):
            r[0].last = T
            continue
        if j == unregularized:
            catch_up(r, K, T, 0.0, 0.0, c, rule)
        else:
            catch_up(r, K, T, c.lam, c.l1, c, rule)
        for k in range(K):
            finite &= isfinite(r[k].v)
    return finite


cdef inline void touch(Record* r, Py_ssize_t n, long long T, long long ev, double lam,
                       double l1, const LazyCore* c, const RateRule* rule) noexcept nogil:
    """``catch_up`` with its common case inlined: no event to cross
    (``ev = last_event(T)``), one decay."""
    cdef long long tau = r[0].last
    if tau < ev:
        catch_up(r, n, T, lam, l1, c, rule)
    elif tau != T:
        decay(r, n, T - tau, lam, l1, rule)
        r[0].last = T


cdef inline void step_weight(Record* r, double lam, double l1, double g) noexcept nogil:
    """One update of one weight, ``theta <- max(0, 1 - eta lam) theta - eta
    g`` (Algorithm 1, line 5); with the L1 penalty the step's ``eta C`` is
    owed and the weight clipped."""
    cdef double e = r.eta, f = 1.0 - e * lam
    if f < 0.0:
        f = 0.0
    r.v = f * r.v - e * g
    if Record is StepRecordL1:
        l1_owe(r, f, e * l1)
        l1_clip(r)


cdef extern from *:
    """
    #ifndef SKSO_PREFETCH_W
    #define SKSO_PREFETCH_W(p) __builtin_prefetch((const void*)(p), 1, 1)
    #endif
    """
    void prefetch_for_write "SKSO_PREFETCH_W"(const void* p) noexcept nogil


cdef inline void prefetch_block(const Record* r, Py_ssize_t n) noexcept nogil:
    """Prefetch a block's records (a line at a time): kernels call it for the
    next row's blocks, mostly cold in a large model."""
    cdef const char* p = <const char*>r
    cdef const char* end = <const char*>(r + n)
    while p < end:
        prefetch_for_write(p)
        p += 64
