"""The orthant-wise pieces of OWL-QN (Andrew and Gao, ICML 2007), one pass each.

L-BFGS itself (``sequence/_lbfgs.py``) is a NumPy two-loop recursion over
BLAS; these are the element-wise steps that NumPy would do with several
temporaries over the ``n_weights`` vectors: the pseudo-gradient (Eq. 4), the
direction's sign constraint (Section 3.2, "constrain the search direction
to the orthant of -pseudo-gradient") and the projected line-search point
(Eq. 7, ``pi(x + step d; xi)``) with its L1 norm and Armijo slope.
"""
from libc.math cimport fabs


def pseudo_gradient(const double[::1] x, const double[::1] g, double c, double[::1] out):
    """``out = diamond f(x)`` for ``f = smooth + c ||x||_1`` (Eq. 4): the
    one-sided derivative that points downhill, or 0 at a kink where neither
    side descends."""
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        for i in range(n):
            if x[i] < 0.0:
                out[i] = g[i] - c
            elif x[i] > 0.0:
                out[i] = g[i] + c
            elif g[i] < -c:
                out[i] = g[i] + c
            elif g[i] > c:
                out[i] = g[i] - c
            else:
                out[i] = 0.0


def constrain_direction(double[::1] d, const double[::1] pg):
    """Zero the components of ``d`` that do not descend along ``-pg``
    (``d_i pg_i >= 0``), in place."""
    cdef Py_ssize_t i, n = d.shape[0]
    with nogil:
        for i in range(n):
            if d[i] * pg[i] >= 0.0:
                d[i] = 0.0


def projected_point(double[::1] x, const double[::1] xp, const double[::1] d, double step,
                    const double[::1] pg):
    """``x = pi(xp + step d; xi)`` with the orthant ``xi = sign(xp)``, or
    ``sign(-pg)`` where ``xp = 0`` (Eq. 7); components that would cross
    (or leave 0 against ``xi``) are set to 0.

    Returns
    -------
    l1 : float
        ``||x||_1``.
    slope : float
        ``(x - xp) . pg``, the Armijo test's directional term.
    """
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double l1 = 0.0, slope = 0.0, xi, z
    with nogil:
        for i in range(n):
            xi = xp[i] if xp[i] != 0.0 else -pg[i]
            z = xp[i] + step * d[i]
            if z * xi <= 0.0:
                z = 0.0
            x[i] = z
            l1 += fabs(z)
            slope += (z - xp[i]) * pg[i]
    return l1, slope


def l1_norm(const double[::1] x):
    """``||x||_1``."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double s = 0.0
    with nogil:
        for i in range(n):
            s += fabs(x[i])
    return s
