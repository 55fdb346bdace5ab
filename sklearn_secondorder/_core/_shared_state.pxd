# What the threads of a pass shared on one state use (the kernels' shared
# passes: _psa_fast, _crf_psa, _crf_sgd, _sbm_team; "Threads on one state"
# in doc/core.md): the barrier they meet at and the queue they draw from
# (_barrier.h), and which thread owns which block. Each thread owns the
# blocks of a share of the cache lines, which it alone reads and writes.

cdef extern from "_barrier.h":
    ctypedef struct Barrier "skso_barrier":
        int n
    void barrier_init "skso_barrier_init"(Barrier* b, int n) noexcept nogil
    void barrier_abort "skso_barrier_abort"(Barrier* b) noexcept nogil
    bint barrier_wait "skso_barrier_wait"(Barrier* b, int* local_sense) noexcept nogil
    long draw "skso_draw"(long* next) noexcept nogil


cdef inline int owner_of(Py_ssize_t j, Py_ssize_t d, int line_shift,
                         int n_threads) noexcept nogil:
    """The thread that owns block ``j`` (``d``: thread 0's, the intercept's
    or the bias's): a multiplicative hash of its cache line ``j >>
    line_shift`` (records that share a line share an owner: two threads
    writing one line would pass it back and forth) taken to ``[0,
    n_threads)``, so that the blocks of any feature order share out evenly,
    without a division."""
    if j == d:
        return 0
    cdef unsigned int h = <unsigned int>(j >> line_shift) * 2654435761u
    return <int>((<unsigned long long>h * <unsigned int>n_threads) >> 32)


cdef inline int line_shift_of(Py_ssize_t stride) noexcept nogil:
    """``owner_of``'s shift for blocks of ``stride`` bytes: ``log2`` of the
    blocks a 64-byte line holds."""
    cdef int shift = 0
    while (stride << shift) < 64:
        shift += 1
    return shift
