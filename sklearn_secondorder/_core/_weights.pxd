# Weight vectors for the SGD-type kernels.
#
# ScaledWeights: w = scale * v with O(1) shrink, O(nnz) dot and add, and an
# optional lazy running sum of the iterates (averaged SGD, ASF). Parameters are
# laid out as a C-order (n_features, n_outputs) block so that one feature owns
# n_outputs contiguous weights (n_outputs = 1 for binary models).

cdef class ScaledWeights:
    cdef double[::1] v_arr
    cdef double* v
    cdef readonly Py_ssize_t n_features
    cdef readonly int n_outputs
    cdef readonly double scale
    cdef readonly bint averaged
    cdef double[::1] u_arr
    cdef double* u
    cdef readonly double avg_coef        # C in  sum_of_iterates = u + C * v
    cdef readonly double n_iterates
    # the cumulative L1 penalty (Tsuruoka et al. 2009), in units of v: the total
    # l1_u so far, and per weight l1_q[p], the penalty already applied
    cdef readonly bint has_l1
    cdef readonly double l1_u
    cdef double[::1] l1_q_arr
    cdef double* l1_q

    cdef void dot(self, const double* x, const int* ind, int nnz, double* out) noexcept nogil
    cdef void add(self, const double* x, const int* ind, int nnz, const double* c) noexcept nogil
    cdef void shrink(self, double factor) noexcept nogil
    cdef void fold(self) noexcept nogil
    cdef void count_iterate(self, double count) noexcept nogil
    cdef void reset_to_average(self) noexcept nogil
    cdef double sq_norm(self) noexcept nogil
    cdef bint is_finite(self) noexcept nogil
    cdef void l1_add(self, double amount) noexcept nogil
    cdef void l1_apply_all(self) noexcept nogil


cdef extern from "_psa_math.h":
    double one_minus_decay "skso_one_minus_decay"(double z) noexcept nogil
    double l1_apply "skso_l1_apply"(double w, double owed_down, double owed_up) noexcept nogil


cdef inline void l1_apply_weight(ScaledWeights w, Py_ssize_t p) noexcept nogil:
    """Catch weight ``p`` up with the cumulative L1 penalty (Tsuruoka et al.,
    ApplyPenalty; ``skso_l1_apply``): ``u``, ``q`` and ``v`` are all in the
    units of ``v``, so the clip is at the true weight's 0 (``scale > 0``)."""
    cdef double z = w.v[p], nv
    # (no branch on the weight's value: its sign is not predictable)
    nv = l1_apply(z, w.l1_u + w.l1_q[p], w.l1_u - w.l1_q[p])
    w.v[p] = nv
    w.l1_q[p] += nv - z
    if w.averaged:
        w.u[p] -= w.avg_coef * (nv - z)


cdef extern from "_block_ops.h":
    void row_l1_apply "skso_row_l1_apply"(double* v, double* q, double* avg, double u,
                                          double c, Py_ssize_t K) noexcept nogil


cdef inline void l1_apply_rows(ScaledWeights w, const int* ind, int nnz) noexcept nogil:
    """``l1_apply_weight`` on the ``n_outputs`` weights of each listed feature
    (a multi-output feature's as one vectorised loop, ``_block_ops.h``)."""
    cdef int i, K = w.n_outputs
    cdef Py_ssize_t p
    if K == 1:
        for i in range(nnz):
            l1_apply_weight(w, ind[i])
        return
    for i in range(nnz):
        p = <Py_ssize_t>ind[i] * K
        row_l1_apply(w.v + p, w.l1_q + p, w.u + p if w.averaged else NULL, w.l1_u,
                     w.avg_coef, K)


from libc.math cimport exp, log1p

cdef extern from *:
    """
    #define SKSO_NO_EVENT (1LL << 62)  /* no pending event (adaptation off) */
    """
    long long NO_EVENT "SKSO_NO_EVENT"


# LazyStepWeights: per-coordinate step sizes eta_p with lazy (just-in-time)
# catch-up of the L2 decay (1 - eta_p lam)^k for coordinates untouched for k
# steps, and, when period b > 0, PSA's step-size adaptation every 2b updates
# (Hsu et al., Algorithm 1) applied lazily too. Blocks of n_outputs weights
# share their touch times; block `unregularized` (the intercept) has no L2.

cimport cython


cdef extern from "_psa_math.h":
    double decay_taylor "skso_decay_taylor"(double z) noexcept nogil
    double log_decay_series "skso_log_decay_series"(double x) noexcept nogil
    double psa_factor_of_ratio "skso_psa_factor"(double u, double m, double kappa,
                                                 double inv_denom, double f_lo,
                                                 double f_hi) noexcept nogil


ctypedef struct PSAConstants:
    # Algorithm 1's adaptation constants (Eq. 10), fixed for a LazyStepWeights
    double m
    double kappa
    double inv_denom     # 1 / (m + kappa + n)
    double f_lo          # psa_beta: the smallest factor
    double f_hi          # psa_alpha: the largest factor


@cython.final
cdef class LazyStepWeights:
    # strided views (stride 2) of three interleaved buffers: (v, eta) and
    # (snap0, snap1) per weight, (last, next_event) per block
    cdef double* v
    cdef double* eta
    cdef double* snap0
    cdef double* snap1
    cdef long long* last
    cdef long long* next_event
    cdef double* rate                # log(1 - eta_p lam_p), cached (NULL: rate_from_eta)
    cdef double[::1] _rate_arr
    # sweep_all's fallback: every block listed, sweep's buffers (malloc'd on first use)
    cdef Py_ssize_t* _every_block
    cdef Py_ssize_t* _kept
    cdef unsigned char* _idle
    cdef object _arrays
    cdef readonly Py_ssize_t n_blocks
    cdef readonly int n_outputs
    cdef readonly double lam
    cdef readonly long long period
    cdef readonly double psa_alpha, psa_beta, kappa, m, n
    cdef PSAConstants consts
    cdef double factor_hi, log_alpha, eta_clip
    cdef double geo_den[37]          # alpha^m - 1, m < 37 (closed-form skip)
    cdef readonly Py_ssize_t unregularized
    cdef readonly double min_factor, max_factor
    cdef readonly long long n_adaptations
    cdef readonly bint taylor_ok     # sweep_all may use the loops of _sweep_k1.h
    cdef readonly double max_rate    # max |rate| at init (eta only decreases)
    # every eta_p lam < 1e-4 (so for the object's lifetime) and no L1: a
    # decay's log-rate is log_decay_series(eta_p lam), computed from eta's
    # cache line (rate_of, the row loops' *_eta), and no rate array exists
    cdef readonly bint rate_from_eta
    # rate_from_eta with multi-output blocks: catch_up runs a regularized
    # block's events as vector loops over its weights (_catch_up_rows,
    # _block_ops.h), the scalar arithmetic's bits; _row_scratch holds the
    # series of _skip_rows (4 n_outputs doubles). (public: a test sets it
    # False to run the scalar catch-up on the same state; never set it True)
    cdef public bint row_events
    cdef double* _row_scratch
    cdef double[::1] _row_scratch_arr
    # the cumulative L1 penalty (Tsuruoka et al. 2009) on per-coordinate steps:
    # per weight what it is owed, (u + q, u - q) interleaved, u its own total
    cdef double* l1d
    cdef readonly bint has_l1
    cdef readonly double l1          # C = alpha l1_ratio
    cdef double l1_over_lam          # C / lam (lam > 0)

    cdef void catch_up(self, Py_ssize_t j, long long T) noexcept nogil
    cdef void catch_up_l1(self, Py_ssize_t j, long long T) noexcept nogil
    cdef inline void _catch_up(self, Py_ssize_t j, long long T, bint with_l1) noexcept nogil
    cdef void _catch_up_rows(self, Py_ssize_t j, long long T) noexcept nogil
    cdef void _skip_rows(self, Py_ssize_t j, long long k) noexcept nogil
    cdef inline void _note_factors(self, double f_min, double f_max) noexcept nogil
    cdef inline double _exp(self, double z) noexcept nogil
    cdef inline void _decay_either(self, Py_ssize_t j, double lam, long long k,
                                   bint with_l1) noexcept nogil
    cdef void catch_up_all(self, long long T) noexcept nogil
    cdef inline bint _is_zero_block(self, Py_ssize_t j) noexcept nogil
    cdef Py_ssize_t sweep(self, const Py_ssize_t* due, Py_ssize_t n_due, Py_ssize_t* keep,
                          unsigned char* idle, int max_idle, long long ev) noexcept nogil
    cdef void sweep_all(self, long long ev) noexcept nogil
    cdef void _decay(self, Py_ssize_t j, double lam, long long k) noexcept nogil
    cdef void _decay_l1(self, Py_ssize_t j, long long k) noexcept nogil
    cdef void _skip_param(self, Py_ssize_t p, double lam, long long k, double* geo,
                          int* n_geo) noexcept nogil
    cdef void _adapt(self, Py_ssize_t p, double lam) noexcept nogil
    cdef void _decay_one(self, Py_ssize_t p, double lam, long long k) noexcept nogil
    cdef inline double _clipped_decay(self, Py_ssize_t p, double x, long long k, double* geo,
                                      int* n_geo) noexcept nogil
    cdef void _skip_param_l1(self, Py_ssize_t p, double lam, long long k, double* geo,
                             int* n_geo) noexcept nogil
    cdef bint _closed_windows(self, Py_ssize_t p, double lam, long long k, double* geo,
                              int* n_geo, double* f, double* owed,
                              double* fk) noexcept nogil
    cdef bint _stays_nonzero(self, Py_ssize_t p, double lam, long long k) noexcept nogil
    cdef bint is_finite(self) noexcept nogil


cdef extern from "_psa_math.h":
    # exp(z): Taylor to z^6 when |z| < 1e-3, else libm's exp (small_exp) or
    # the library-free exp that the vector loops of _block_ops.h share
    # (small_exp_v: multi-output blocks, so their scalar and vector paths agree)
    double small_exp "skso_small_exp"(double z) noexcept nogil
    double small_exp_v "skso_small_exp_v"(double z) noexcept nogil


cdef inline double log_decay(double x) noexcept nogil:
    """``log(1 - x)`` for ``0 <= x`` (``-1e300`` when ``x >= 1``): the log-rate of the
    decay ``(1 - x)^k``, ``x = eta lam``.

    The series ``skso_log_decay_series`` for ``x < 1e-4`` (below rounding),
    ``log1p`` otherwise.
    """
    if x < 1e-4:
        return log_decay_series(x)
    if x >= 1.0:
        return -1e300    # finite: k r = 0 at k = 0, exp(k r) = 0 for k >= 1
    return log1p(-x)


cdef inline double decay_factor(double r, long long k) noexcept nogil:
    """``(1 - x)^k = exp(k r)`` from ``r = log_decay(x)``, for ``k >= 0``
    (exactly 1 at ``k = 0`` or ``r = 0``).

    ``z = k r <= 0``: ``skso_decay_taylor`` when ``|z| < 5e-4``, ``small_exp``
    otherwise (0 when ``x >= 1``: the step's factor ``max(0, 1 - eta lam)``).
    """
    cdef double z = <double>k * r
    if z > -5e-4:
        return decay_taylor(z)
    return small_exp(z)


cdef inline double decay_factor_of(LazyStepWeights w, double r, long long k) noexcept nogil:
    """``decay_factor`` of a weight of ``w``: with ``small_exp_v`` in a
    multi-output model (the exp of its vector loops), ``small_exp`` in a
    binary one."""
    cdef double z = <double>k * r
    if z > -5e-4:
        return decay_taylor(z)
    return small_exp_v(z) if w.n_outputs > 1 else small_exp(z)


cdef inline double psa_factor(double num, double den, PSAConstants c) noexcept nogil:
    """PSA's step-size factor (Eqs. 6-9, ``skso_psa_factor``) from
    ``num = w(t+2b) - w(t+b)`` and ``den = w(t+b) - w(t)``; 0 for ``0/0`` (no
    curvature information: keep eta)."""
    cdef double f
    if den == 0.0 and num == 0.0:
        return 0.0
    f = psa_factor_of_ratio(num / den, c.m, c.kappa, c.inv_denom, c.f_lo, c.f_hi)
    return 0.0 if f != f else f


cdef inline double adapt_step(double* eta, double* rate, double v, double snap1, double snap0,
                              double lam, PSAConstants c) noexcept nogil:
    """The window-end update of one weight's step size, ``eta <- f eta``
    (Eq. 8, ``f = psa_factor``), and of its decay log-rate (``lam`` is the
    weight's L2: 0 leaves its rate at 0; ``rate`` NULL: derived from eta, not
    stored). Returns ``f``, 0 when eta is kept."""
    cdef double f = psa_factor(v - snap1, snap1 - snap0, c)
    if f != 0.0:
        eta[0] *= f
        if lam != 0.0 and rate != NULL:
            rate[0] = log_decay(eta[0] * lam)
    return f


cdef inline double decay_power(double x, long long k) noexcept nogil:
    """``(1 - x)^k`` for ``0 <= x``, ``k >= 1`` (0 when ``x >= 1``):
    ``decay_factor(log_decay(x), k)``."""
    return decay_factor(log_decay(x), k)


cdef extern from "_block_ops.h":
    void row_decay_taylor "skso_row_decay_taylor"(double* ve, const double* rate,
                                                  Py_ssize_t K, double k) noexcept nogil
    void row_emit "skso_row_emit"(double* em, const double* ve, double x,
                                  Py_ssize_t K) noexcept nogil
    void row_shrink "skso_row_shrink"(double* ve, double lam, Py_ssize_t K) noexcept nogil
    void row_step "skso_row_step"(double* ve, double x, const double* d,
                                  Py_ssize_t K) noexcept nogil
    void row_step_masked "skso_row_step_masked"(double* ve, double x, const double* d,
                                                const unsigned char* mask,
                                                Py_ssize_t K) noexcept nogil
    void row_shrink_step "skso_row_shrink_step"(double* ve, double lam, double sw,
                                                const double* grad, double x,
                                                Py_ssize_t K) noexcept nogil
    void row_decay_taylor_eta "skso_row_decay_taylor_eta"(double* ve, Py_ssize_t K, double k,
                                                          double lam) noexcept nogil
    void row_decay_eta "skso_row_decay_eta"(double* ve, Py_ssize_t K, double k,
                                            double lam) noexcept nogil
    void row_snap0 "skso_row_snap0"(const double* ve, double* snaps, Py_ssize_t K) noexcept nogil
    void row_snap1 "skso_row_snap1"(const double* ve, double* snaps, Py_ssize_t K) noexcept nogil
    long long row_adapt "skso_row_adapt"(double* ve, double* snaps, double* rates, Py_ssize_t K,
                                         double lam, double m, double kappa, double inv_denom,
                                         double f_lo, double f_hi, double* f_min,
                                         double* f_max) noexcept nogil
    Py_ssize_t row_skip_closed "skso_row_skip_closed"(double* ve, double* snaps, double* scratch,
                                                      Py_ssize_t K, double lam, double m2b,
                                                      double p1,
                                                      const double* geo_den) noexcept nogil


cdef inline void l1_clip(LazyStepWeights w, Py_ssize_t p) noexcept nogil:
    """Tsuruoka's clip of weight ``p`` (``skso_l1_apply``) with what it is
    owed, ``(u + q, u - q)``; the change goes to ``q``."""
    cdef double* d = w.l1d + 2 * p
    cdef double z = w.v[2 * p], nv
    nv = l1_apply(z, d[0], d[1])
    d[0] += nv - z
    d[1] -= nv - z
    w.v[2 * p] = nv


cdef inline void l1_penalize(LazyStepWeights w, Py_ssize_t p, double f,
                             double owed) noexcept nogil:
    """The L1 side of steps whose L2 factor is ``f`` and penalty ``owed`` (one
    step: ``f = max(0, 1 - eta lam)``, ``owed = eta C``, after its gradient
    term): ``u`` and ``q`` shrink with the weight, ``u += owed``; then the clip."""
    cdef double* d = w.l1d + 2 * p
    d[0] = d[0] * f + owed
    d[1] = d[1] * f + owed
    l1_clip(w, p)


cdef inline void l1_settle(LazyStepWeights w, Py_ssize_t p, double f, double owed) noexcept nogil:
    """Weight ``p`` after steps without a gradient: ``v *= f`` (their L2
    decay), then ``l1_penalize`` (their L1 penalty, in the weight's units
    after the decay)."""
    w.v[2 * p] *= f
    l1_penalize(w, p, f, owed)


cdef inline void decay_weight_l1(LazyStepWeights w, Py_ssize_t p, long long k) noexcept nogil:
    """``k >= 1`` untouched steps of (regularized) weight ``p`` with the L1
    penalty, ``eta`` constant: the decay ``f = (1 - eta lam)^k`` and the
    penalty owed, the sum of the steps' ``eta C`` each shrunk by the later
    decays, ``C / lam (1 - f)`` (``skso_one_minus_decay``; ``k eta C``
    without L2)."""
    if w.lam == 0.0:
        l1_settle(w, p, 1.0, w.l1 * w.eta[2 * p] * <double>k)
    else:
        l1_settle(w, p, decay_factor_of(w, w.rate[p], k),
                  w.l1_over_lam * one_minus_decay(<double>k * w.rate[p]))


cdef inline double rate_of(LazyStepWeights w, Py_ssize_t p, double lam) noexcept nogil:
    """The decay log-rate ``log(1 - eta_p lam)`` of weight ``p`` whose L2 is
    ``lam`` (0 for the unregularized block). With ``rate_from_eta`` it is
    computed from eta's cache line (``log_decay`` is its series there; -0.0
    without L2, a decay factor of exactly 1), so that a catch-up or an event
    does not load or store a cold line of the rate array; otherwise it is the
    array's."""
    if w.rate_from_eta:
        return log_decay_series(w.eta[2 * p] * lam)
    return w.rate[p]


cdef inline double* rate_slot(LazyStepWeights w, Py_ssize_t p) noexcept nogil:
    """Where weight ``p``'s decay log-rate is stored (``adapt_step``), NULL
    with ``rate_from_eta`` (not stored)."""
    return NULL if w.rate_from_eta else w.rate + p


cdef inline void decay_block(LazyStepWeights w, Py_ssize_t j, long long k) noexcept nogil:
    """``k >= 1`` untouched steps of (regularized) block ``j``: ``v *= (1 - eta
    lam)^k``. A multi-output block runs it as one vectorised loop
    (``_block_ops.h``, the same bits): with ``rate_from_eta`` always (the
    Taylor branch of ``decay_factor`` for every weight when every ``|k
    rate|`` is below ``5e-4``, bounded by ``k max_rate``; else its branches
    as selects), otherwise in that Taylor regime."""
    cdef int q, K = w.n_outputs
    cdef Py_ssize_t p, p0 = j * K
    if K > 1 and w.rate_from_eta:
        if <double>k * w.max_rate < 5e-4:
            row_decay_taylor_eta(w.v + 2 * p0, K, <double>k, w.lam)
        else:
            row_decay_eta(w.v + 2 * p0, K, <double>k, w.lam)
        return
    if K > 1 and <double>k * w.max_rate < 5e-4:
        row_decay_taylor(w.v + 2 * p0, w.rate + p0, K, <double>k)
        return
    for q in range(K):
        p = p0 + q
        if w.v[2 * p] != 0.0:
            w.v[2 * p] *= decay_factor_of(w, rate_of(w, p, w.lam), k)


cdef inline void lazy_catch_up(LazyStepWeights w, Py_ssize_t j, long long T) noexcept nogil:
    """Bring block ``j`` to time ``T`` (``LazyStepWeights.catch_up``), with the
    common case -- no event to cross, one decay -- inlined into the kernels."""
    cdef long long tau = w.last[2 * j]
    if w.next_event[2 * j] <= T:
        w.catch_up(j, T)
        return
    if tau == T:
        return
    if j != w.unregularized and w.lam != 0.0:
        decay_block(w, j, T - tau)
    w.last[2 * j] = T


cdef extern from "_block_ops.h":
    void row_decay_l1_taylor "skso_row_decay_l1_taylor"(
        double* ve, double* owed, const double* rate, Py_ssize_t K, double k,
        double c_over_lam) noexcept nogil
    void row_step_l1 "skso_row_step_l1"(double* ve, double* owed, double lam, double sw,
                                        const double* grad, double x, double l1,
                                        Py_ssize_t K) noexcept nogil


cdef inline void decay_block_l1(LazyStepWeights w, Py_ssize_t j, long long k) noexcept nogil:
    """``decay_block`` with the L1 penalty: ``decay_weight_l1`` on each weight;
    a multi-output block in the Taylor regime (as ``decay_block``) as one
    vectorised loop (``_block_ops.h``, the same bits)."""
    cdef int q, K = w.n_outputs
    cdef Py_ssize_t p0 = j * K
    if K > 1 and w.lam != 0.0 and <double>k * w.max_rate < 5e-4:
        row_decay_l1_taylor(w.v + 2 * p0, w.l1d + 2 * p0, w.rate + p0, K, <double>k,
                            w.l1_over_lam)
        return
    for q in range(K):
        decay_weight_l1(w, p0 + q, k)


cdef inline void lazy_catch_up_l1(LazyStepWeights w, Py_ssize_t j, long long T) noexcept nogil:
    """``lazy_catch_up`` with the L1 penalty (``catch_up_l1``, ``decay_block_l1``):
    the kernels' L1 paths call it, so that the L2 paths are unchanged."""
    cdef long long tau = w.last[2 * j]
    if w.next_event[2 * j] <= T:
        w.catch_up_l1(j, T)
        return
    if tau == T:
        return
    if j != w.unregularized:
        decay_block_l1(w, j, T - tau)
    w.last[2 * j] = T


cdef extern from *:
    """
    #ifndef SKSO_PREFETCH
    #define SKSO_PREFETCH(p) __builtin_prefetch((const void*)(p), 1, 1)
    #endif
    """
    void SKSO_PREFETCH(const void* p) noexcept nogil


cdef inline void prefetch_block(LazyStepWeights w, Py_ssize_t j) noexcept nogil:
    """Prefetch block ``j``'s state (value and step, snapshots, decay rates,
    times), a cache line at a time: a kernel calls it for the blocks of the
    next row or sequence, so that their (mostly cold) state is on its way
    while the current one is processed."""
    cdef int q, K = w.n_outputs
    cdef Py_ssize_t p0 = j * K
    SKSO_PREFETCH(w.last + 2 * j)    # (and next_event: one 16-byte pair)
    if K == 1:                      # one line each
        SKSO_PREFETCH(w.v + 2 * j)
        SKSO_PREFETCH(w.snap0 + 2 * j)
        if not w.rate_from_eta:
            SKSO_PREFETCH(w.rate + j)
        return
    for q in range(0, 2 * K, 8):
        SKSO_PREFETCH(w.v + 2 * p0 + q)
        SKSO_PREFETCH(w.snap0 + 2 * p0 + q)
    SKSO_PREFETCH(w.v + 2 * p0 + 2 * K - 1)
    SKSO_PREFETCH(w.snap0 + 2 * p0 + 2 * K - 1)
    if w.rate_from_eta:
        return
    for q in range(0, K, 8):
        SKSO_PREFETCH(w.rate + p0 + q)
    SKSO_PREFETCH(w.rate + p0 + K - 1)


cdef inline void prefetch_l1(LazyStepWeights w, Py_ssize_t j) noexcept nogil:
    """Prefetch what block ``j``'s weights are owed (``prefetch_block``'s
    companion on the L1 path)."""
    cdef int q, K = w.n_outputs
    cdef Py_ssize_t p0 = j * K
    for q in range(0, 2 * K, 8):
        SKSO_PREFETCH(w.l1d + 2 * p0 + q)
    SKSO_PREFETCH(w.l1d + 2 * p0 + 2 * K - 1)
