# Seeded xorshift32 generator used inside nogil loops (never 0 as a state).

cdef inline unsigned int rand_uint(unsigned int* state) noexcept nogil:
    cdef unsigned int x = state[0]
    if x == 0:
        x = 2463534242u
    x ^= x << 13
    x ^= x >> 17
    x ^= x << 5
    state[0] = x
    return x


cdef inline Py_ssize_t rand_below(unsigned int* state, Py_ssize_t end) noexcept nogil:
    """Uniform integer in [0, end) (end < 2**32)."""
    return <Py_ssize_t>(rand_uint(state) % <unsigned int>end)
