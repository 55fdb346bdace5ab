/* Software prefetches for the kernels' row loops, as macros.
 *
 * Why macros and not (inline) functions: GCC's local pure-const analysis
 * treats __builtin_prefetch as free of side effects, so a function whose
 * only effect is prefetching is "const" to it, and the calls to it are
 * deleted as dead code before the inliner could put them in the loop. A
 * macro expands in the body of the loop that calls it, where the prefetch
 * stays. (Compilers without __builtin_prefetch get no-ops.)
 */
#ifndef SKSO_PREFETCH_H
#define SKSO_PREFETCH_H

#include "_lazy_records.h" /* SKSO_HELD_WIDTH_BITS */

#if defined(__GNUC__) || defined(__clang__)
#define SKSO_PREFETCH_READ(p) __builtin_prefetch((const void *)(p), 0, 3)
#define SKSO_PREFETCH_WRITE(p) __builtin_prefetch((const void *)(p), 1, 3)
#else
#define SKSO_PREFETCH_READ(p) ((void)(p))
#define SKSO_PREFETCH_WRITE(p) ((void)(p))
#endif

/* The bytes [p, p + n) for writing, a cache line at a time. */
#define SKSO_PREFETCH_LINES(p, n)                                                                 \
    do {                                                                                          \
        const char *skso_p_ = (const char *)(p);                                                  \
        const char *skso_end_ = skso_p_ + (n);                                                    \
        for (; skso_p_ < skso_end_; skso_p_ += 64)                                                \
            SKSO_PREFETCH_WRITE(skso_p_);                                                         \
    } while (0)

/* The cache lines of the bytes [p, p + n) for reading, at most 8 (a longer
 * row's rest comes in as it is read). */
#define SKSO_PREFETCH_SPAN(p, n)                                                                  \
    do {                                                                                          \
        const char *skso_end_ = (const char *)(p) + (n);                                          \
        const char *skso_q_ = (const char *)((size_t)(p) & ~(size_t)63);                          \
        for (int skso_k_ = 0; skso_k_ < 8 && skso_q_ < skso_end_; skso_k_++, skso_q_ += 64)       \
            SKSO_PREFETCH_READ(skso_q_);                                                          \
    } while (0)

/* Row k of a RowDataset in its current order (sparse only): the start of
 * its indices and values, its label and weight (in a shuffled order as cold
 * as the row), and the offsets of row k + 1. Called two rows ahead, so that
 * the next row's indices are in cache when a kernel prefetches what they
 * point to. */
#define SKSO_PREFETCH_ROW(ds, k)                                                                  \
    do {                                                                                          \
        if ((ds)->is_sparse && (k) < (ds)->n_samples) {                                           \
            Py_ssize_t skso_i_ = (ds)->order_ptr[k];                                              \
            long long skso_at_ = (ds)->indptr_ptr[skso_i_];                                       \
            long long skso_nnz_ = (ds)->indptr_ptr[skso_i_ + 1] - skso_at_;                       \
            SKSO_PREFETCH_SPAN((ds)->indices_ptr + skso_at_, 4 * skso_nnz_);                      \
            if ((ds)->is_float32)                                                                 \
                SKSO_PREFETCH_SPAN((ds)->data32_ptr + skso_at_, 4 * skso_nnz_);                   \
            else                                                                                  \
                SKSO_PREFETCH_SPAN((ds)->data_ptr + skso_at_, 8 * skso_nnz_);                     \
            SKSO_PREFETCH_READ((ds)->y_ptr + skso_i_);                                            \
            SKSO_PREFETCH_READ((ds)->sw_ptr + skso_i_);                                           \
            if ((k) + 1 < (ds)->n_samples)                                                        \
                SKSO_PREFETCH_READ((ds)->indptr_ptr + (ds)->order_ptr[(k) + 1]);                  \
        }                                                                                         \
    } while (0)

/* What a touch of block j of a lazy state's Layout L reads (last, v, eta;
 * a binary record whole; a held block's first line, all of it for one or
 * two labels), for writing: kernels call it for the next row's blocks,
 * mostly cold in a large model. The events' fields of a wide block come in
 * when it crosses one. SKSO_PREFETCH_FIXED_BLOCK: the same for a state
 * without held blocks. */
#define SKSO_PREFETCH_FIXED_BLOCK(L, j)                                                           \
    SKSO_PREFETCH_LINES((L)->base + (j) * (L)->stride, (L)->K > 1 ? (L)->off_dsnap : (L)->stride)
#define SKSO_PREFETCH_BLOCK(L, j)                                                                 \
    do {                                                                                          \
        if ((L)->record_at == NULL)                                                               \
            SKSO_PREFETCH_FIXED_BLOCK(L, j);                                                      \
        else                                                                                      \
            SKSO_PREFETCH_WRITE((L)->base + ((L)->record_at[j] >> SKSO_HELD_WIDTH_BITS));         \
    } while (0)

#endif
