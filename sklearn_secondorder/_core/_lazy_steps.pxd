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
    double log_decay_series "skso_log_decay_series"(double x) noexcept nogil
    double psa_factor_of_ratio "skso_psa_factor"(double u, double m, double kappa,
                                                 double inv_denom, double f_lo,
                                                 double f_hi) noexcept nogil
    double one_minus_decay "skso_one_minus_decay"(double z) noexcept nogil
    double l1_apply "skso_l1_apply"(double w, double owed_down, double owed_up) noexcept nogil

from libc.math cimport exp, expm1, log1p


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
    double lam           # L2 strength of the regularised blocks
    double l1            # L1 strength C (StepRecordL1 only)
    double m, kappa, inv_denom, f_lo, f_hi    # Eqs. (9)-(10)
    double log_alpha     # log(psa_alpha)
    double eta_clip      # (1 - eta lam)^b >= kappa  <=>  eta <= eta_clip
    double geo_den[41]   # 1 - alpha^m, m = 1..40 (the idle windows' series)


cdef LazyCore make_core(options) except *


cdef inline long long last_event(const LazyCore* c, long long T) noexcept nogil:
    """The latest event time ``<= T`` (-1 without events): a block current at
    ``tau`` has events to cross iff ``tau < last_event(T)``."""
    if c.b == 0:
        return -1
    return (T // c.b) * c.b


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
    """``exp(z)`` for ``z <= 0``: a Taylor polynomial in the common case
    ``|z| < 5e-4`` (error below ``|z|^5 / 120``), libm's otherwise."""
    if z > -5e-4:
        return decay_taylor(z)
    return exp(z)


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


cdef inline void apply_event(Record* r, Py_ssize_t n, long long e,
                             const LazyCore* c) noexcept nogil:
    """The event at time ``e`` (a multiple of b) on ``n`` weights current at
    ``e``: the mid-window snapshot (``e / b`` odd), or the window end: the
    step-size update (Eq. 8) and the new window's first snapshot."""
    cdef Py_ssize_t q
    cdef double f
    if (e // c.b) & 1:
        for q in range(n):
            r[q].dsnap = <float>(r[q].v - r[q].snap)
            r[q].snap = r[q].v
    else:
        for q in range(n):
            f = psa_factor(r[q].v - r[q].snap, r[q].dsnap, c)
            if f != 0.0:
                r[q].eta = <float>(r[q].eta * f)
            r[q].snap = r[q].v


cdef inline double idle_log_decay(double x, long long n_win, const LazyCore* c) noexcept nogil:
    """``sum_{i < n_win} log(1 - x alpha^i)``: the log-decay per step of
    ``n_win`` idle windows in the clipped regime (the factor is ``alpha`` in
    each), as the series ``-sum_m x^m / m (1 - A^m) / (1 - alpha^m)``,
    ``A = alpha^n_win`` (``1 - A^m`` by ``P_m = P_(m-1) A + P_1``, without
    cancellation)."""
    cdef double p1 = -expm1(<double>n_win * c.log_alpha), a = 1.0 - p1
    cdef double pm = p1, xm = 1.0, term, total = 0.0
    cdef int mm
    for mm in range(1, 41):
        xm *= x
        if mm > 1:
            pm = pm * a + p1
        term = xm / mm * pm / c.geo_den[mm]
        total += term
        if term < 1e-17 * total:
            break
    return -total


cdef inline void replay_window(Record* r, double lam, double l1, const LazyCore* c,
                               const RateRule* rule) noexcept nogil:
    """One idle window of one weight, from its start: decay, the mid-window
    snapshot, decay, the window end."""
    decay(r, 1, c.b, lam, l1, rule)
    apply_event(r, 1, c.b, c)
    decay(r, 1, c.b, lam, l1, rule)
    apply_event(r, 1, 2 * c.b, c)


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
    cdef double x
    for q in range(n):
        left = n_win
        if Record is StepRecord:
            if lam == 0.0:
                continue       # (v does not move: 0/0 keeps eta; snap == v already)
            while left > 0 and r[q].v != 0.0 and r[q].eta > c.eta_clip:
                replay_window(&r[q], lam, l1, c, rule)
                left -= 1
            if left > 0 and r[q].v != 0.0:
                x = r[q].eta * lam
                r[q].v *= exp(2.0 * <double>c.b * idle_log_decay(x, left, c))
                r[q].eta = <float>(r[q].eta * exp(<double>left * c.log_alpha))
                r[q].snap = r[q].v
        else:
            while left > 0 and r[q].v != 0.0:
                replay_window(&r[q], lam, l1, c, rule)
                left -= 1
            if left > 0:
                decay(&r[q], 1, 2 * c.b * left, lam, l1, rule)


cdef inline void catch_up(Record* r, Py_ssize_t n, long long T, double lam, double l1,
                          const LazyCore* c, const RateRule* rule) noexcept nogil:
    """Bring a block of ``n`` records to time ``T``: the decays and every
    event in ``(last, T]``, whole idle windows in closed form. ``lam`` and
    ``l1`` are the block's (0 for an unregularised intercept)."""
    cdef long long tau = r[0].last, b = c.b, e, n_win
    if b > 0:
        e = (tau // b + 1) * b
        while e <= T:
            decay(r, n, e - tau, lam, l1, rule)
            apply_event(r, n, e, c)
            tau = e
            if ((e // b) & 1) == 0:
                n_win = (T - e) // (2 * b)
                if n_win > 0:
                    idle_windows(r, n, n_win, lam, l1, c, rule)
                    tau = e + 2 * b * n_win
                    e = tau
            e += b
    decay(r, n, T - tau, lam, l1, rule)
    r[0].last = T


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
