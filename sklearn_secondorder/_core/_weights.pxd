# Weight vectors for the SGD-type kernels.
#
# ScaledWeights: w = scale * v with O(1) shrink, O(nnz) dot and add, and an
# optional lazy running sum of the iterates (averaged SGD, ASF). Parameters are
# laid out as a C-order (n_features, n_outputs) block so that one feature owns
# n_outputs contiguous weights (n_outputs = 1 for binary models).
from ._block_ops cimport row_l1_apply
from ._psa_math cimport l1_apply


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
