# The records of PSA's lazy state: one per block of weights (one feature's
# K weights, one per output; a CRF attribute's, one per label), laid out by
# the one table of _lazy_records.h: the time `last` the block is current at
# (every event up to it applied), then its fields K wide, first those every
# touch reads -- the weights v and their step sizes eta (float32) -- then
# those of the events -- the current window's first-half moves dsnap
# (float32), the snapshots at the last event -- and with the L1 penalty
# what each weight is owed. A binary weight's record is 32 bytes (64 with
# L1), two or one to a cache line; a wider block is padded to whole cache
# lines, and its fields are contiguous runs that vector loops read at unit
# stride. The arrays start on a cache line (_lazy_steps.pyx allocates them).

cdef extern from "_lazy_records.h":
    const Py_ssize_t LAST_BYTES "SKSO_LAST_BYTES"
    const Py_ssize_t AT_V "SKSO_AT_V"
    const Py_ssize_t AT_ETA "SKSO_AT_ETA"
    const Py_ssize_t AT_DSNAP "SKSO_AT_DSNAP"
    const Py_ssize_t AT_SNAP "SKSO_AT_SNAP"
    const Py_ssize_t AT_OWED_DOWN "SKSO_AT_OWED_DOWN"
    const Py_ssize_t AT_OWED_UP "SKSO_AT_OWED_UP"
    const Py_ssize_t WEIGHT_BYTES "SKSO_WEIGHT_BYTES"
    const Py_ssize_t WEIGHT_BYTES_L1 "SKSO_WEIGHT_BYTES_L1"
    const long long HELD_WIDTH_BITS "SKSO_HELD_WIDTH_BITS"
    const long long HELD_WIDTH_MASK "SKSO_HELD_WIDTH_MASK"


ctypedef struct Layout:
    # the records of a state: block j's at base + j * stride, its fields at
    # the off_* offsets; or, for a CRF trained on its features only
    # (CRFsuite's feature set: record_at not NULL), block j's record at
    # base + (record_at[j] >> HELD_WIDTH_BITS), holding the w = record_at[j]
    # & HELD_WIDTH_MASK weights of its trained labels, each field w wide,
    # then the labels (int32)
    char* base
    Py_ssize_t stride    # bytes (a power of two for K = 1, whole cache lines else)
    Py_ssize_t K         # weights a block (at most, when held)
    const long long* record_at
    Py_ssize_t label_at  # (held) the labels' offset: LAST_BYTES + label_at * w
    Py_ssize_t off_v, off_eta, off_dsnap, off_snap, off_down, off_up  # (last: 0)


ctypedef struct Block:
    # the fields of one record (or of one weight's slice of it: shift)
    double* v            # the weights, current at `last`
    double* snap         # the weights at the last event (window start or mid-window)
    float* eta           # the step sizes (float32: a factor in [beta, alpha] per window)
    float* dsnap         # theta(t+b) - theta(t), the current window's first half
    long long* last      # the time the block is current at
    # the cumulative L1 penalty (Tsuruoka et al. 2009) in the weight's units:
    # what it is owed, u + q towards 0 from above and u - q from below (u the
    # total of its own steps' eta C, q what was applied); WithL1 only
    double* owed_down
    double* owed_up


cdef inline Block record_fields(char* p, Py_ssize_t off_v, Py_ssize_t off_eta,
                                Py_ssize_t off_dsnap, Py_ssize_t off_snap, Py_ssize_t off_down,
                                Py_ssize_t off_up) noexcept nogil:
    """The fields of the record at ``p``, at the given offsets."""
    cdef Block b
    b.last = <long long*>p
    b.v = <double*>(p + off_v)
    b.eta = <float*>(p + off_eta)
    b.dsnap = <float*>(p + off_dsnap)
    b.snap = <double*>(p + off_snap)
    b.owed_down = <double*>(p + off_down)
    b.owed_up = <double*>(p + off_up)
    return b


cdef inline Block fixed_block_at(const Layout* L, Py_ssize_t j) noexcept nogil:
    """The fields of block ``j`` of a state without held blocks (the linear
    kernels': no test of the layout in their loops)."""
    return record_fields(L.base + j * L.stride, L.off_v, L.off_eta, L.off_dsnap, L.off_snap,
                         L.off_down, L.off_up)


cdef inline Block block_at(const Layout* L, Py_ssize_t j) noexcept nogil:
    """The fields of block ``j``, held or not (a held block's as wide as its
    weights: the table's offsets with ``K = w``)."""
    if L.record_at == NULL:
        return fixed_block_at(L, j)
    cdef Py_ssize_t w = L.record_at[j] & HELD_WIDTH_MASK
    return record_fields(L.base + (L.record_at[j] >> HELD_WIDTH_BITS),
                         LAST_BYTES + AT_V * w, LAST_BYTES + AT_ETA * w,
                         LAST_BYTES + AT_DSNAP * w, LAST_BYTES + AT_SNAP * w,
                         LAST_BYTES + AT_OWED_DOWN * w, LAST_BYTES + AT_OWED_UP * w)


cdef inline Py_ssize_t width_of(const Layout* L, Py_ssize_t j) noexcept nogil:
    """How many weights block ``j`` holds."""
    return L.K if L.record_at == NULL else L.record_at[j] & HELD_WIDTH_MASK


cdef inline const int* labels_of(const Layout* L, Py_ssize_t j) noexcept nogil:
    """The labels of the weights held block ``j`` holds, in its record."""
    cdef long long at = L.record_at[j]
    return <const int*>(L.base + (at >> HELD_WIDTH_BITS) + LAST_BYTES
                        + L.label_at * (at & HELD_WIDTH_MASK))


cdef inline Block shift(Block b, Py_ssize_t q) noexcept nogil:
    """Weight ``q`` of a block, as a block of one (its ``last`` is the block's)."""
    b.v += q
    b.snap += q
    b.eta += q
    b.dsnap += q
    b.owed_down += q
    b.owed_up += q
    return b
