# The lazy update of the diagonal (tail) coordinates of low-rank SBM
# (``_sbm_lowrank``). Between two touches a tail coordinate moves only through
# ``mu += alpha theta`` and ``theta -= c mu`` with a fixed ``c = eta / D_i``:
# a linear recurrence, applied in closed form when the coordinate is next
# touched, so an example costs nothing for the features it does not have.
# Inline: ``advance_tail`` runs once per tail entry of every row.
from libc.math cimport fabs


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
