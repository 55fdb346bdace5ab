"""Periodic Step-size Adaptation (PSA) on the CRF core, with lazy catch-up.

PSA (Hsu, Chang, Huang and Lee, NIPS 2009 workshop, Algorithm 1): SGD with a
step size per parameter, ``theta <- theta - eta o g(theta; sequence)``, where
``g`` is the gradient of ``-log p(y|x) + lam/2 ||theta||^2``; every ``2b``
updates, from the snapshots ``theta(t)``, ``theta(t+b)``, ``theta(t+2b)``::

    gamma_i = (theta_i(t+2b) - theta_i(t+b)) / (theta_i(t+b) - theta_i(t))   # Eq. 6
    u_i     = sign(gamma_i) min(|gamma_i|, kappa)                              # Eq. 7
    v_i     = (m + u_i) / (m + kappa + n)                                      # Eq. 9
    eta_i  *= v_i                                                              # Eq. 8
    m = kappa (alpha + beta) / (alpha - beta),  n = 2 kappa (1 - alpha) / (alpha - beta)   # Eq. 10

Windows are aligned on the global update counter (``t = 0, 2b, 4b, ...``).
Ratio rules: ``0/0`` (a parameter that did not move) leaves ``eta_i``
unchanged; ``x/0`` with ``x != 0`` counts as ``gamma_i = sign(x) inf`` (so
``u_i = sign(x) kappa``).

Lazy catch-up (so a pass costs close to a plain SGD pass rather than O(d)
every 2b updates). The parameters of one attribute row (its ``H`` label
weights), of the transitions and of the bias are touched together, so one
"last update" time per row suffices. A row untouched for ``k`` updates
inside a window only shrinks: ``theta_i *= (1 - eta_i lam)^k``, computed as
``exp(k log1p(-eta_i lam))`` with the logarithm cached per parameter. Its
snapshots are taken as it crosses ``t+b`` and ``t+2b``. A window in which a
row is untouched from end to end has ``gamma_i = (1 - eta_i lam)^b`` exactly
(the shrink's ratio, for ``theta_i != 0``; ``0/0`` otherwise). Once
``(1 - eta_i lam)^b >= kappa`` every later idle window is clipped to
``u_i = kappa``, ``v_i = alpha``, so ``K`` idle windows give
``eta_i *= alpha^K`` and ``theta_i *= prod_k (1 - eta_i alpha^k lam)^(2b)``,
summed in closed form: ``sum_k log1p(-c alpha^k) = -sum_m c^m/m
(1 - alpha^(mK)) / (1 - alpha^m)`` (``c = eta_i lam < 1``, terms below
1e-18 relative are dropped). Idle windows before that regime are stepped one
by one. Every row is brought up to date at the end of each call. The result
is the dense algorithm's to rounding (tests compare with a NumPy
re-implementation).
"""
import numpy as np
from libc.math cimport exp, log, log1p, expm1, pow, fabs, isfinite

from ._crf_fast cimport SequenceData, CRFWeights, CRFContext
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC


cdef extern from *:
    """
    #define SKSO_PREFETCH(p) __builtin_prefetch((const void*)(p), 1, 1)
    """
    void SKSO_PREFETCH(const void* p) noexcept nogil


cdef inline void _prefetch_sequence(SequenceData ds, Py_ssize_t s, const double* v,
                                    const double* aux, int H, Py_ssize_t A) noexcept nogil:
    """Prefetch the weight and state rows a sequence will touch (its rows are
    mostly cold: rare attributes), one cache line (8 doubles) at a time."""
    cdef long long kk
    cdef Py_ssize_t j, q
    for kk in range(ds.indptr[ds.offsets[s]], ds.indptr[ds.offsets[s + 1]]):
        j = ds.indices[kk]
        if j >= A:
            continue
        for q in range(0, H, 8):
            SKSO_PREFETCH(v + j * H + q)
        for q in range(0, 3 * H, 8):
            SKSO_PREFETCH(aux + 3 * j * H + q)


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + 1e-9 * <double>ts.tv_nsec


cdef inline double _exp(double y) noexcept nogil:
    """``exp(y)`` by its Taylor polynomial when ``|y| < 0.05`` (to ``y^10``:
    truncation < 3e-21 relative), the usual case for a shrink over a few
    windows; libm's ``exp`` otherwise."""
    if -1e-3 < y < 1e-3:
        return 1.0 + y * (1.0 + y * (0.5 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (1.0 / 120.0)))))
    if -0.05 < y < 0.05:
        return 1.0 + y * (1.0 + y * (0.5 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (
            1.0 / 120.0 + y * (1.0 / 720.0 + y * (1.0 / 5040.0 + y * (1.0 / 40320.0 + y * (
                1.0 / 362880.0 + y * (1.0 / 3628800.0))))))))))
    return exp(y)


cdef inline double _log1m(double x) noexcept nogil:
    """``log(1 - x)``; a series when ``|x| < 1e-3`` (4 terms below 1e-4:
    truncation < 2e-17 relative; 6 terms otherwise: < 2e-19)."""
    if -1e-4 < x < 1e-4:
        return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0 + x * 0.25)))
    if -1e-3 < x < 1e-3:
        return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0 + x * (0.25 + x * (0.2 + x / 6.0)))))
    return log1p(-x)


cdef int MAX_TERMS = 8


cdef double _sum_log1p_geometric(double c, double a, long long K) noexcept nogil:
    """``sum_{k<K} log1p(-c a^k)`` for ``0 <= c < 1``, ``0 < a <= 1``."""
    cdef long long k
    cdef int m
    cdef double s = 0.0, ak = 1.0, term, cm, la
    if K <= 16 or a == 1.0:
        if a == 1.0:
            return <double>K * log1p(-c)
        for k in range(K):
            s += log1p(-c * ak)
            ak *= a
        return s
    la = log(a)
    cm = 1.0
    for m in range(1, 200):
        cm *= c
        term = cm / m * (expm1(m * K * la) / expm1(m * la))
        s -= term
        if fabs(term) <= 1e-18 * fabs(s):
            break
    return s


cdef class PSAState:
    """Per-parameter step sizes, cached logs, snapshots and row clocks.

    Parameters
    ----------
    v : ndarray, the flat CRF weights (modified in place)
    aux : ndarray of shape (3 * len(v),)
        Interleaved per weight: step size, window-start snapshot, mid-window
        snapshot (one stream of memory per row instead of three).
    last : ndarray of shape (n_rows,), int64
        Update count at which each row's values in ``v`` are current
        (rows: attributes, then the ``H`` transition rows, then the bias).
    n_states, period, lam, alpha, beta, kappa
        ``H``, ``b`` and the PSA constants (``lam`` is the L2 strength).
    """
    cdef double* v
    cdef double* aux
    cdef long long* last
    cdef readonly int H
    cdef readonly long long b
    cdef readonly double lam, a, be, kappa, m, n, c_clip, log_a, inv_denom
    cdef double one_minus_a_pow[8]
    cdef readonly Py_ssize_t n_rows
    cdef object _keep

    def __init__(self, double[::1] v, double[::1] aux, long long[::1] last, int n_states,
                 int period, double lam, double alpha, double beta, double kappa):
        if not (0.0 < beta < alpha <= 1.0 and 0.0 < kappa < 1.0 and period >= 1):
            raise ValueError("PSA needs 0 < beta < alpha <= 1, 0 < kappa < 1, period >= 1")
        n = v.shape[0]
        if aux.shape[0] != 3 * n or last.shape[0] * n_states != n:
            raise ValueError("PSA state arrays do not match the weights")
        if not 0.0 <= lam:
            raise ValueError("lam must be >= 0")
        self._keep = (v, aux, last)
        self.v, self.aux, self.last = &v[0], &aux[0], &last[0]
        self.H, self.b = n_states, period
        self.lam, self.a, self.be, self.kappa = lam, alpha, beta, kappa
        self.m = kappa * (alpha + beta) / (alpha - beta)                   # Eq. 10
        self.n = 2.0 * kappa * (1.0 - alpha) / (alpha - beta)
        self.inv_denom = 1.0 / (self.m + kappa + self.n)                  # Eq. 9
        self.n_rows = last.shape[0]
        # (1 - c)^b >= kappa  <=>  c <= 1 - kappa^(1/b)
        self.c_clip = -expm1(log(kappa) / period)
        self.log_a = log(alpha)
        cdef int mm
        for mm in range(MAX_TERMS):
            self.one_minus_a_pow[mm] = -expm1((mm + 1) * self.log_a)    # 1 - a^(m+1)

    cdef inline void window_end(self, Py_ssize_t row) noexcept nogil:
        """Eqs. 6-9 for one row from ``s0``, ``s1`` and the current values."""
        cdef Py_ssize_t p, p0 = row * self.H
        cdef double num, den, g, u
        for p in range(p0, p0 + self.H):
            num = self.v[p] - self.aux[3 * p + 2]
            den = self.aux[3 * p + 2] - self.aux[3 * p + 1]
            if den == 0.0:
                if num == 0.0:
                    self.aux[3 * p + 1] = self.v[p]
                    continue                      # 0/0: eta unchanged
                u = self.kappa if num > 0.0 else -self.kappa
            else:
                g = num / den
                if g > self.kappa:
                    u = self.kappa
                elif g < -self.kappa:
                    u = -self.kappa
                else:
                    u = g
            self.aux[3 * p] *= (self.m + u) * self.inv_denom
            self.aux[3 * p + 1] = self.v[p]

    cdef inline void arrive(self, Py_ssize_t row, long long tau) noexcept nogil:
        """A row reached update count ``tau``: snapshot / adapt at boundaries."""
        cdef long long ph = tau % (2 * self.b)
        cdef Py_ssize_t p, p0 = row * self.H
        if ph == self.b:
            for p in range(p0, p0 + self.H):
                self.aux[3 * p + 2] = self.v[p]
        elif ph == 0 and tau > 0:
            self.window_end(row)

    cdef void advance(self, Py_ssize_t row, long long T) noexcept nogil:
        """Bring a row from its last update count to ``T`` (see the module doc).

        One pass over the row's weights, each walked through the boundaries
        with its own scalars: the shrink up to each boundary, the mid-window
        snapshot, the window end (Eqs. 6-9 from its snapshots), then ``K``
        whole idle windows at once, then the shrink up to ``T``. The idle
        windows' series coefficients ``G_m = (1 - a^(mK)) / (1 - a^m)`` and
        ``a^K`` are shared by the row (``x = 1 - a^K`` keeps them accurate).
        """
        cdef long long tau0 = self.last[row], tau, nb, K = 0, k, b2 = 2 * self.b, first_end
        cdef Py_ssize_t p, p0 = row * self.H
        cdef int mm, M = 0
        cdef double lam = self.lam, x, eta, s0, s1, lr, num, den, g, u, c, cm, S, rb
        cdef double cmax = 0.0, aK = 1.0, xa, xm
        cdef double G[8]
        cdef long long ev_steps[4]
        cdef int ev_kind[4]
        cdef int n_ev, e
        cdef long long d_last
        if tau0 >= T:
            return
        nb = (tau0 // self.b + 1) * self.b
        if nb > T:
            # no boundary crossed: the shrink only
            if lam != 0.0:
                for p in range(p0, p0 + self.H):
                    self.v[p] *= _exp(<double>(T - tau0) * _log1m(self.aux[3 * p] * lam))
            self.last[row] = T
            return
        first_end = (tau0 // b2 + 1) * b2
        if first_end <= T:
            K = (T - first_end) // b2
        if K > 0 and lam != 0.0:
            for p in range(p0, p0 + self.H):
                c = self.aux[3 * p] * lam       # eta only decreases: an upper bound
                if c > cmax:
                    cmax = c
            cm = cmax
            for mm in range(1, MAX_TERMS + 1):
                cm *= cmax
                if cm < 1e-18:
                    M = mm
                    break
            if self.a == 1.0:
                for mm in range(M):
                    G[mm] = <double>K
            else:
                xa = -expm1(<double>K * self.log_a)       # 1 - a^K
                aK = 1.0 - xa
                xm = xa
                for mm in range(M):
                    if mm > 0:
                        xm = xm + xa * (1.0 - xm)          # 1 - a^((mm+1) K)
                    G[mm] = xm / self.one_minus_a_pow[mm]
        # the boundary events, shared by the row: (updates before it, kind)
        # kind 0: mid-window snapshot; 1: window end; 2: window end + K idle windows
        n_ev = 0
        tau = tau0
        while True:
            nb = (tau // self.b + 1) * self.b
            if nb > T:
                break
            ev_steps[n_ev] = nb - tau
            if nb % b2 != 0:
                ev_kind[n_ev] = 0
            elif nb == first_end and K > 0:
                ev_kind[n_ev] = 2
                nb += K * b2
            else:
                ev_kind[n_ev] = 1
            n_ev += 1
            tau = nb
        d_last = T - tau
        for p in range(p0, p0 + self.H):
            x = self.v[p]
            eta = self.aux[3 * p]
            s0 = self.aux[3 * p + 1]
            s1 = self.aux[3 * p + 2]
            lr = _log1m(eta * lam) if lam != 0.0 else 0.0
            for e in range(n_ev):
                if lam != 0.0:
                    x *= _exp(<double>ev_steps[e] * lr)
                if ev_kind[e] == 0:
                    s1 = x                                 # mid-window snapshot
                    continue
                # window end: Eqs. 6-9
                num = x - s1
                den = s1 - s0
                if den != 0.0 or num != 0.0:               # 0/0: eta unchanged
                    if den == 0.0:
                        u = self.kappa if num > 0.0 else -self.kappa
                    else:
                        g = num / den
                        u = self.kappa if g > self.kappa else (-self.kappa if g < -self.kappa else g)
                    eta *= (self.m + u) * self.inv_denom
                    lr = _log1m(eta * lam) if lam != 0.0 else 0.0
                s0 = x
                if ev_kind[e] == 2:
                    # K whole windows with the shrink only: ratio (1 - eta lam)^b
                    if x != 0.0 and lam != 0.0:
                        k = K
                        while k > 0:
                            c = eta * lam
                            if c <= self.c_clip:
                                # clipped from here on: v_i = alpha in every window
                                if k == K and M > 0:
                                    S = 0.0
                                    cm = 1.0
                                    for mm in range(1, M + 1):
                                        cm *= c
                                        S -= cm / mm * G[mm - 1]
                                    eta *= aK
                                else:
                                    S = _sum_log1p_geometric(c, self.a, k)
                                    eta *= pow(self.a, <double>k)
                                x *= _exp(<double>b2 * S)
                                break
                            rb = _exp(<double>self.b * _log1m(c))      # (1 - eta lam)^b
                            x *= rb * rb
                            eta *= (self.m + rb) * self.inv_denom
                            k -= 1
                        lr = _log1m(eta * lam)
                    s0 = x
            if lam != 0.0 and d_last > 0:
                x *= _exp(<double>d_last * lr)
            self.v[p] = x
            self.aux[3 * p] = eta
            self.aux[3 * p + 1] = s0
            self.aux[3 * p + 2] = s1
        self.last[row] = T

    def flush(self, long long T):
        """Bring every row to update count ``T``."""
        cdef Py_ssize_t r
        with nogil:
            for r in range(self.n_rows):
                self.advance(r, T)


def psa_epochs(SequenceData ds, CRFWeights w, PSAState st, *, long long t=0, int n_epochs=1,
               bint shuffle=True, unsigned int seed=1, bint fit_intercept=True):
    """Run ``n_epochs`` passes of PSA (Algorithm 1) over ``ds``.

    ``w`` wraps the flat weights (``scale`` 1, no averaging) that ``st``
    updates; ``t`` is the global update counter (windows are aligned on it).
    All rows are brought up to date before returning.

    One update at count ``t`` on a sequence: bring the rows it reads to ``t``;
    inference at ``theta(t)``; then, row by row as the gradient is applied,
    ``theta <- (1 - eta lam) theta`` once (the first time the row is met)
    and ``theta += eta o grad log p(y|x)``; at a window boundary (``t + 1``
    a multiple of ``b``) the rows just updated take their snapshot / adapt.

    Returns
    -------
    info : dict
        ``t``, ``seed``, ``epochs``, ``mean_loss`` (last pass, pre-step),
        ``diverged``, ``seconds`` (per pass).
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if w.n_latent != 1:
        raise ValueError("PSA supports n_latent == 1 only")
    if w.averaged or w.scale != 1.0:
        raise ValueError("PSA weights carry no scale or average")
    if w.v != st.v:
        raise ValueError("w and st must share the weight buffer")
    cdef int H = w.n_states
    cdef Py_ssize_t A = w.n_attributes
    cdef Py_ssize_t bias_row = A + H
    cdef CRFContext ctx = CRFContext(H, 1, ds.max_len)
    cdef Py_ssize_t k, s, row, p, p0, j
    cdef long long r, kk, first
    cdef int tt, h, T, i, epoch, epochs_run = 0
    cdef double ll, loss_sum = 0.0, c, lam = st.lam, t_start
    cdef bint diverged = False, boundary
    cdef unsigned int rng = seed if seed != 0 else 1
    cdef const int* lab = &ds.labels[0]
    cdef const int* y
    cdef double* d
    cdef double* v = w.v
    cdef double* aux = st.aux
    cdef long long* last = st.last
    seconds = []
    with nogil:
        for epoch in range(n_epochs):
            t_start = _now()
            if shuffle:
                ds.shuffle(&rng)
            loss_sum = 0.0
            if ds.n_sequences > 0:
                _prefetch_sequence(ds, ds.order[0], v, aux, H, A)
            for k in range(ds.n_sequences):
                s = ds.order[k]
                y = lab + ds.offsets[s]
                first = ds.offsets[s]
                T = <int>(ds.offsets[s + 1] - first)
                if k + 1 < ds.n_sequences:
                    _prefetch_sequence(ds, ds.order[k + 1], v, aux, H, A)
                # 1. bring the rows this sequence reads up to date
                for kk in range(ds.indptr[first], ds.indptr[first + T]):
                    row = ds.indices[kk]
                    if row < A and last[row] < t:
                        st.advance(row, t)
                for row in range(A, A + H):
                    st.advance(row, t)
                if fit_intercept:
                    st.advance(bias_row, t)
                # 2. inference at theta(t)
                ctx.load_transitions(w)
                ctx.load_emissions(ds, s, w)
                ctx.finish_emissions()
                ll = ctx.loglik(y)
                if not isfinite(ll):
                    diverged = True
                    break
                loss_sum -= ll
                # 3. theta <- (1 - eta lam) theta + eta o grad, row by row
                d = ctx.tmp
                for tt in range(T):
                    for h in range(H):
                        d[h] = -ctx.marg[<Py_ssize_t>tt * H + h]
                    d[y[tt]] += 1.0
                    r = first + tt
                    for kk in range(ds.indptr[r], ds.indptr[r + 1]):
                        j = ds.indices[kk]
                        if j >= A:
                            continue
                        p0 = j * H
                        if last[j] == t:              # first visit: the L2 shrink
                            last[j] = t + 1
                            if lam != 0.0:
                                for p in range(p0, p0 + H):
                                    v[p] *= 1.0 - aux[3 * p] * lam
                        c = ds.data[kk]
                        for h in range(H):
                            v[p0 + h] += aux[3 * (p0 + h)] * c * d[h]
                    if fit_intercept:
                        p0 = w.bias_offset
                        if last[bias_row] == t:
                            last[bias_row] = t + 1
                            if lam != 0.0:
                                for p in range(p0, p0 + H):
                                    v[p] *= 1.0 - aux[3 * p] * lam
                        for h in range(H):
                            v[p0 + h] += aux[3 * (p0 + h)] * d[h]
                p0 = w.trans_offset
                for i in range(H * H):
                    v[p0 + i] = (1.0 - aux[3 * (p0 + i)] * lam) * v[p0 + i] \
                        - aux[3 * (p0 + i)] * ctx.edge[i]
                for tt in range(1, T):
                    i = y[tt - 1] * H + y[tt]
                    v[p0 + i] += aux[3 * (p0 + i)]
                for row in range(A, A + H):
                    last[row] = t + 1
                t += 1
                # 4. snapshots / adaptation for the rows that just moved
                boundary = t % st.b == 0
                if boundary:
                    for kk in range(ds.indptr[first], ds.indptr[first + T]):
                        row = ds.indices[kk]
                        if row < A and last[row] == t:
                            st.arrive(row, t)
                            last[row] = -t            # visited mark (restored below)
                    for kk in range(ds.indptr[first], ds.indptr[first + T]):
                        row = ds.indices[kk]
                        if row < A and last[row] == -t:
                            last[row] = t
                    for row in range(A, A + H):
                        st.arrive(row, t)
                    if fit_intercept:
                        st.arrive(bias_row, t)
            if diverged:
                break
            epochs_run += 1
            with gil:
                seconds.append(_now() - t_start)
            if not w.is_finite():
                diverged = True
                break
        for row in range(st.n_rows):
            st.advance(row, t)
    return {"t": t, "seed": rng, "epochs": epochs_run,
            "mean_loss": loss_sum / ds.n_sequences if ds.n_sequences else 0.0,
            "diverged": diverged, "seconds": seconds}
