"""SGD-QN kernel: the corrected algorithm of Bordes, Bottou & Gallinari.

Reference: A. Bordes, L. Bottou, P. Gallinari, "SGD-QN: Careful Quasi-Newton
Stochastic Gradient Descent", JMLR 10 (2009), Section 5, Figure 2, with the
2010 erratum ("SGDQN is less careful than expected", as implemented in the
authors' libsgdqn). The diagonal rescaling ``B`` *contains* the 1/t decay.

State of one binary problem with ``d`` features (``lam`` = alpha)::

    w[0:d], b         weights and intercept
    B[0:d+1]          diagonal rescaling; B[d] belongs to the intercept
    invB[0:d+1]       1 / B, accumulated harmonically; starts at lam * t0
    v[0:d+1]          weights remembered before the last regularization step
    count, update_b   skip countdown and the "re-estimate B" flag

One example ``(x, y, s)`` (``p = w.x + b``, ``l'`` = d loss / d p)::

    g = s * l'(p, y)                               # at the pre-step weights
    if update_b:                                   # the example after a skip step
        gv = s * l'(v.x + v_b, y)
        r_i = lam + x_i (g - gv) / (w_i - v_i)     # where w_i != v_i, else lam
        r_b = (g - gv) / (b - v_b)                 # intercept: no L2 term
        r = clip(r, lam, r_max lam)                # r_max = 100 (libsgdqn's cmax)
        invB += skip * r;  B = 1 / invB            # 1/B_i += skip r_i (erratum)
    if --count <= 0:                               # every `skip` examples
        v = (w, b)
        w_i *= 1 - skip lam B_i                    # guarded: see _shrink_factor
        count = skip;  update_b = True
    w -= g * B o x   (non-zeros of x only);   b -= g * B_d

Zero-weight rows are skipped and do not advance the counters. The loss step
touches only the example's non-zeros; the O(d) work (copy of ``v``, dense
regularization, re-estimate of ``B``) happens once every ``skip`` examples.
"""
import numpy as np
from libc.math cimport exp, pow, isfinite
from libc.string cimport memcpy

from ._dataset cimport RowDataset
from ._numeric cimport all_finite, clip_dloss
from ._losses cimport Loss

# Below this value the linearized shrink 1 - skip lam B_i is replaced by the
# product of `skip` exact shrinks (1 - lam B_i)^skip, or by exp(-skip lam B_i)
# when even one shrink would be negative (lam B_i >= 1, i.e. t0 < 1).
cdef double SHRINK_GUARD = 0.8
# Lower clip of the per-coordinate curvature r_i, in units of lam (the L2
# term's own curvature); the upper clip is the argument r_max.
cdef double R_MIN = 1.0


cdef inline double _shrink_factor(double lam_b, double skip) noexcept nogil:
    """The factor of one skip-step regularization, never negative."""
    cdef double f = 1.0 - skip * lam_b
    if f >= SHRINK_GUARD:
        return f
    if lam_b < 1.0:
        return pow(1.0 - lam_b, skip)
    return exp(-skip * lam_b)


cdef inline double _clip_r(double r, double lo, double hi) noexcept nogil:
    if r < lo:
        return lo
    if r > hi:
        return hi
    return r


def sgdqn_epochs(RowDataset ds, double[::1] coef, double[::1] intercept,
                 double[::1] B, double[::1] invB, double[::1] v, *, Loss loss,
                 double alpha, long long skip, long long count, bint update_b,
                 long long t=0, int n_epochs=1, bint shuffle=True,
                 unsigned int seed=1, bint fit_intercept=True,
                 double r_max=100.0):
    """Run ``n_epochs`` passes of SGD-QN over ``ds``, updating the arrays in place.

    Parameters
    ----------
    ds : RowDataset
        Rows with targets in {-1, +1} and sample weights.
    coef : ndarray of shape (n_features,)
    intercept : ndarray of shape (1,)
    B, invB, v : ndarray of shape (n_features + 1,)
        Diagonal rescaling, its inverse and the remembered weights (the last
        entry belongs to the intercept). ``invB`` starts at ``alpha * t0``.
    loss : Loss
        Binary margin loss.
    alpha : float
        L2 strength (the paper's lambda).
    skip : int
        Examples between two regularization steps (and re-estimates of B).
    count, update_b : int, bool
        Skip countdown and pending re-estimate flag (continue across calls).
    t : int
        Examples processed so far.
    n_epochs, shuffle, seed, fit_intercept
        Passes, per-pass shuffling with the xorshift ``seed``, intercept.
    r_max : float
        Upper clip of the curvature estimates ``r_i``, in units of ``alpha``
        (libsgdqn's ``cmax``; the lower clip is ``alpha``).

    Returns
    -------
    info : dict
        ``t``, ``count``, ``update_b``, ``seed``, ``epochs`` run and
        ``diverged`` (non-finite weights after a pass).
    """
    cdef Py_ssize_t d = ds.n_features
    if (coef.shape[0] != d or intercept.shape[0] != 1 or B.shape[0] != d + 1
            or invB.shape[0] != d + 1 or v.shape[0] != d + 1):
        raise ValueError("coef/intercept/B/invB/v shapes do not match the data")
    if loss is None:
        raise ValueError("a binary loss is required")
    if skip < 1:
        raise ValueError("skip must be >= 1")
    if not r_max >= R_MIN:
        raise ValueError("r_max must be >= 1")
    cdef double* w = &coef[0] if d > 0 else NULL
    cdef double* b = &intercept[0]
    cdef double* Bp = &B[0]
    cdef double* iB = &invB[0]
    cdef double* vp = &v[0]
    cdef double lam = alpha, dskip = <double>skip
    cdef double rlo = R_MIN * alpha, rhi = r_max * alpha
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k, epoch, epochs_run = 0
    cdef Py_ssize_t i, j
    cdef double y, sw, p, pv, g, gv, dg, dw, r
    cdef bint diverged = False
    cdef unsigned int rng = seed if seed != 0 else 1
    with nogil:
        for epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            for i in range(ds.n_samples):
                ds.row(i, &x, &ind, &nnz, &y, &sw)
                if sw == 0.0:
                    continue
                p = b[0]
                for k in range(nnz):
                    p += w[ind[k]] * x[k]
                g = sw * clip_dloss(loss.dloss(p, y))
                if update_b:
                    # Secant of the full per-example gradient between v and w
                    # (erratum): only the example's non-zeros can differ from lam.
                    pv = vp[d]
                    for k in range(nnz):
                        pv += vp[ind[k]] * x[k]
                    gv = sw * clip_dloss(loss.dloss(pv, y))
                    dg = g - gv
                    if dg != 0.0:
                        for k in range(nnz):
                            j = ind[k]
                            dw = w[j] - vp[j]
                            if dw != 0.0:
                                r = _clip_r(lam + dg * x[k] / dw, rlo, rhi)
                                iB[j] += dskip * (r - lam)
                        if fit_intercept:
                            dw = b[0] - vp[d]
                            if dw != 0.0:
                                r = _clip_r(dg / dw, rlo, rhi)
                                iB[d] += dskip * (r - lam)
                    for j in range(d + 1):
                        iB[j] += dskip * lam
                        Bp[j] = 1.0 / iB[j]
                    update_b = False
                count -= 1
                if count <= 0:
                    if d > 0:
                        memcpy(vp, w, d * sizeof(double))
                    vp[d] = b[0]
                    for j in range(d):
                        w[j] *= _shrink_factor(lam * Bp[j], dskip)
                    count = skip
                    update_b = True
                if g != 0.0:
                    for k in range(nnz):
                        j = ind[k]
                        w[j] -= g * Bp[j] * x[k]
                    if fit_intercept:
                        b[0] -= g * Bp[d]
                t += 1
            epochs_run += 1
            if not all_finite(w, d) or not isfinite(b[0]):
                diverged = True
                break
    return {"t": t, "count": count, "update_b": bool(update_b), "seed": rng,
            "epochs": epochs_run, "diverged": diverged}


def primal_objective(RowDataset ds, double[::1] coef, double intercept, *, Loss loss,
                     double alpha):
    """``alpha/2 ||w||^2 + sum_i s_i loss(w.x_i + b, y_i) / sum_i s_i`` (Eq. 1).

    Returns ``inf`` when the value is not finite.
    """
    cdef Py_ssize_t d = ds.n_features
    if coef.shape[0] != d:
        raise ValueError("coef does not match the data")
    cdef const double* w = &coef[0] if d > 0 else NULL
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k
    cdef Py_ssize_t i
    cdef double y, sw, p, total = 0.0, wsum = 0.0, sq = 0.0
    with nogil:
        for i in range(d):
            sq += w[i] * w[i]
        for i in range(ds.n_samples):
            ds.row(i, &x, &ind, &nnz, &y, &sw)
            if sw == 0.0:
                continue
            p = intercept
            for k in range(nnz):
                p += w[ind[k]] * x[k]
            total += sw * loss.loss(p, y)
            wsum += sw
    obj = 0.5 * alpha * sq + (total / wsum if wsum > 0 else 0.0)
    return obj if np.isfinite(obj) else np.inf
