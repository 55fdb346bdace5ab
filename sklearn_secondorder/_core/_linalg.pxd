# Small dense linear algebra for the nogil epoch loops: vectors of a few
# hundred entries and matrices of a few rows, too small for a BLAS call to pay
# for itself. Matrices are row-major ``double*``. Inline: every kernel module
# that cimports these gets its own copy, so the loops can inline them.
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from libc.math cimport fabs, isfinite, sqrt


cdef inline void axpy(int n, double a, const double* x, double* y) noexcept nogil:
    """``y += a x`` over ``n`` entries."""
    cdef int k
    for k in range(n):
        y[k] += a * x[k]


cdef inline void scal(int n, double a, double* x) noexcept nogil:
    """``x *= a`` over ``n`` entries."""
    cdef int k
    for k in range(n):
        x[k] *= a


cdef inline double dot(int n, const double* x, const double* y) noexcept nogil:
    """``x . y``, with four interleaved partial sums.

    The vectors here are short: a single chain of dependent additions would
    cost its latency per element.
    """
    cdef int k, m = n & ~3
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    for k in range(0, m, 4):
        s0 += x[k] * y[k]
        s1 += x[k + 1] * y[k + 1]
        s2 += x[k + 2] * y[k + 2]
        s3 += x[k + 3] * y[k + 3]
    for k in range(m, n):
        s0 += x[k] * y[k]
    return (s0 + s1) + (s2 + s3)


cdef inline double strided_dot(int n, const double* x, int incx, const double* y,
                               int incy) noexcept nogil:
    """``sum_k x[k incx] y[k incy]``, summed in order from ``k = 0``: a row or
    column of a small row-major matrix against another, without a copy."""
    cdef int k
    cdef double s = 0.0
    for k in range(n):
        s += x[<size_t>k * incx] * y[<size_t>k * incy]
    return s


cdef inline void matmul(int m, int n, int p, const double* A, int a_row, int a_col,
                        const double* B, int b_row, int b_col, double* C) noexcept nogil:
    """``C = A B`` for small strided matrices (``C`` row-major, ``m x n``).

    ``A`` is ``m x p`` with entry ``(i, l)`` at ``A[i a_row + l a_col]`` and
    ``B`` is ``p x n`` with entry ``(l, j)`` at ``B[l b_row + j b_col]``, so a
    transpose is a swap of strides. ``C`` must not overlap ``A`` or ``B``.
    """
    cdef int i, j
    for i in range(m):
        for j in range(n):
            C[i * n + j] = strided_dot(p, A + <size_t>i * a_row, a_col,
                                       B + <size_t>j * b_col, b_row)


cdef inline int cholesky(int n, double* A) noexcept nogil:
    """In-place lower Cholesky factor ``L`` of the SPD ``n x n`` matrix ``A``.

    Only the lower triangle is read and written. Returns 0 when a pivot is
    not positive (``A`` not positive definite, or NaN), 1 otherwise.
    """
    cdef int i, j, p
    cdef double s, inv
    for j in range(n):
        s = A[j * n + j]
        for p in range(j):
            s -= A[j * n + p] * A[j * n + p]
        if not (s > 0.0):
            return 0
        A[j * n + j] = sqrt(s)
        inv = 1.0 / A[j * n + j]
        for i in range(j + 1, n):
            s = A[i * n + j]
            for p in range(j):
                s -= A[i * n + p] * A[j * n + p]
            A[i * n + j] = s * inv
    return 1


cdef inline void lower_solve_rows(int n, const double* L, int m, double* B) noexcept nogil:
    """``B <- L^-1 B`` in place by forward substitution.

    ``L`` is ``n x n`` lower triangular (a ``cholesky`` factor); ``B`` has
    ``n`` rows of length ``m``. Row operations, so the long rows stream
    through ``axpy``.
    """
    cdef int i, j
    for i in range(n):
        for j in range(i):
            axpy(m, -L[i * n + j], B + <size_t>j * m, B + <size_t>i * m)
        scal(m, 1.0 / L[i * n + i], B + <size_t>i * m)


cdef inline int solve_small(int n, double* A, double* b) noexcept nogil:
    """``A x = b`` by Gaussian elimination with partial pivoting, in place.

    ``A`` (``n x n``, any square matrix: the Woodbury capacitance matrix is
    not symmetric) is overwritten; ``x`` is left in ``b``. Returns 0 when a
    pivot is exactly zero (singular ``A``).
    """
    cdef int i, j, c, piv
    cdef double m, tmp
    for j in range(n):
        piv = j
        for i in range(j + 1, n):
            if fabs(A[i * n + j]) > fabs(A[piv * n + j]):
                piv = i
        if A[piv * n + j] == 0.0:
            return 0
        if piv != j:
            for c in range(n):
                tmp = A[j * n + c]
                A[j * n + c] = A[piv * n + c]
                A[piv * n + c] = tmp
            tmp = b[j]
            b[j] = b[piv]
            b[piv] = tmp
        for i in range(j + 1, n):
            m = A[i * n + j] / A[j * n + j]
            if m != 0.0:
                for c in range(j, n):
                    A[i * n + c] -= m * A[j * n + c]
                b[i] -= m * b[j]
    for i in range(n - 1, -1, -1):
        m = b[i]
        for c in range(i + 1, n):
            m -= A[i * n + c] * b[c]
        b[i] = m / A[i * n + i]
    return 1


cdef inline int smallest_eigvec(int n, const double* T, double* A, double* e,
                                double* y) noexcept nogil:
    """Approximate unit eigenvector ``e`` of the smallest eigenvalue of the PSD ``T``.

    Inverse iteration from the last unit vector on ``T + shift I``, the
    smallest shift (from ``1e-13 trace``, times 100 per failure) whose
    Cholesky factor exists; at most 30 iterations, stopping when the residual
    ``||T e - (e^T T e) e||`` is below ``1e-12 trace``. ``A`` (``n x n``) and
    ``y`` (``n``) are workspace. The merge of Section 3.2 only needs an
    approximation: it adds the residual back, so accuracy affects the
    tightness of the bound, never its validity.

    Returns 0 when no shift up to ``1e-13 trace * 100^7`` factors (then ``e``
    is not set), 1 otherwise.
    """
    cdef int i, j, _it
    cdef double tr = 0.0, shift, nrm, lam, res, v, tol2
    cdef int factored = 0
    for i in range(n):
        tr += T[i * n + i]
    shift = 1e-13 * tr + 1e-300
    for _it in range(8):
        for i in range(n * n):
            A[i] = T[i]
        for i in range(n):
            A[i * n + i] += shift
        if cholesky(n, A):
            factored = 1
            break
        shift *= 100.0
    if not factored:
        return 0
    for i in range(n):
        A[i * n + i] = 1.0 / A[i * n + i]     # the solves multiply by the reciprocals
        e[i] = 0.0
    e[n - 1] = 1.0
    tol2 = (1e-12 * tr) * (1e-12 * tr)
    for _it in range(30):
        # solve A y = e: L z = e, L^T y = z
        for i in range(n):
            v = e[i]
            for j in range(i):
                v -= A[i * n + j] * y[j]
            y[i] = v * A[i * n + i]
        for i in range(n - 1, -1, -1):
            v = y[i]
            for j in range(i + 1, n):
                v -= A[j * n + i] * y[j]
            y[i] = v * A[i * n + i]
        nrm = 0.0
        for i in range(n):
            nrm += y[i] * y[i]
        nrm = sqrt(nrm)
        if not (nrm > 0.0) or not isfinite(nrm):
            return 1
        nrm = 1.0 / nrm
        for i in range(n):
            e[i] = y[i] * nrm
        # residual T e - (e^T T e) e
        lam = 0.0
        for i in range(n):
            v = 0.0
            for j in range(n):
                v += T[i * n + j] * e[j]
            y[i] = v
            lam += v * e[i]
        res = 0.0
        for i in range(n):
            res += (y[i] - lam * e[i]) * (y[i] - lam * e[i])
        if res <= tol2:
            break
    return 1


cdef inline double householder_sandwich(int n, double* T, const double* v,
                                        double* Tv) noexcept nogil:
    """``T <- Q T Q`` for the reflector ``Q = I - bq v v^T``, ``bq = 2 / v^T v``.

    ``T`` is ``n x n``; expanded as ``T - bq v (Tv)^T - bq (Tv) v^T + bq^2
    (v^T T v) v v^T`` so it costs ``O(n^2)``. ``Tv`` (``n``) is workspace.
    Returns ``bq``, for ``householder_rows``.
    """
    cdef int i, j
    cdef double s, v_T_v, bq = 2.0 / dot(n, v, v)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += T[i * n + j] * v[j]
        Tv[i] = s
    v_T_v = dot(n, v, Tv)
    for i in range(n):
        for j in range(n):
            T[i * n + j] += (-bq * v[i] * Tv[j] - bq * Tv[i] * v[j]
                             + bq * bq * v_T_v * v[i] * v[j])
    return bq


cdef inline void householder_rows(int n, int m, double bq, const double* v, double* B,
                                  double* work) noexcept nogil:
    """``B <- Q B = B - bq v (v^T B)`` for the reflector of ``householder_sandwich``.

    ``B`` has ``n`` rows of length ``m``; ``work`` (``m``) receives ``v^T B``.
    """
    cdef int i, h
    for h in range(m):
        work[h] = 0.0
    for i in range(n):
        axpy(m, v[i], B + <size_t>i * m, work)
    for i in range(n):
        axpy(m, -bq * v[i], work, B + <size_t>i * m)


# BLAS and LAPACK: SciPy's, the C functions that scipy.linalg.cython_blas and
# cython_lapack export (their ``__pyx_capi__`` capsules), looked up when a
# module is imported, as a ``cimport`` of those modules does, but without
# their declarations at build time: SciPy is not a build requirement. A
# module keeps each in a module-level pointer of the function's name
# (``cdef dgemm_t dgemm = scipy_dgemm()``), so the calls read as BLAS's.
ctypedef void (*dgemm_t)(char* transa, char* transb, int* m, int* n, int* k, double* alpha,
                         double* a, int* lda, double* b, int* ldb, double* beta, double* c,
                         int* ldc) noexcept nogil
ctypedef void (*dgemv_t)(char* trans, int* m, int* n, double* alpha, double* a, int* lda,
                         double* x, int* incx, double* beta, double* y,
                         int* incy) noexcept nogil
ctypedef void (*dpotrf_t)(char* uplo, int* n, double* a, int* lda, int* info) noexcept nogil
ctypedef void (*dpotri_t)(char* uplo, int* n, double* a, int* lda, int* info) noexcept nogil
ctypedef void (*dpotrs_t)(char* uplo, int* n, int* nrhs, double* a, int* lda, double* b,
                          int* ldb, int* info) noexcept nogil


cdef inline void* _scipy_function(str module, str name, str signature) except NULL:
    """The C function ``name`` of ``scipy.linalg.<module>``, after checking
    that its C signature (the capsule's name, SciPy's ``double`` typedef read
    as ``double``) is ``signature``."""
    import re
    from importlib import import_module
    cdef const char* c_name
    capsule = import_module("scipy.linalg." + module).__pyx_capi__[name]
    c_name = PyCapsule_GetName(capsule)
    found = re.sub(r"__pyx_t_5scipy_6linalg_\d+cython_(?:blas|lapack)_d\b", "double",
                   c_name.decode())
    if found != signature:
        raise ImportError(f"scipy.linalg.{module}.{name} has the C signature {found!r}, "
                          f"not {signature!r}")
    return PyCapsule_GetPointer(capsule, c_name)


cdef inline dgemm_t scipy_dgemm() except NULL:
    return <dgemm_t>_scipy_function(
        "cython_blas", "dgemm", "void (char *, char *, int *, int *, int *, double *, double *, "
        "int *, double *, int *, double *, double *, int *)")


cdef inline dgemv_t scipy_dgemv() except NULL:
    return <dgemv_t>_scipy_function(
        "cython_blas", "dgemv", "void (char *, int *, int *, double *, double *, int *, "
        "double *, int *, double *, double *, int *)")


cdef inline dpotrf_t scipy_dpotrf() except NULL:
    return <dpotrf_t>_scipy_function(
        "cython_lapack", "dpotrf", "void (char *, int *, double *, int *, int *)")


cdef inline dpotri_t scipy_dpotri() except NULL:
    return <dpotri_t>_scipy_function(
        "cython_lapack", "dpotri", "void (char *, int *, double *, int *, int *)")


cdef inline dpotrs_t scipy_dpotrs() except NULL:
    return <dpotrs_t>_scipy_function(
        "cython_lapack", "dpotrs", "void (char *, int *, int *, double *, int *, double *, "
        "int *, int *)")
