/* The lazy core's event walk (_lazy_steps.pxd: walk, apply_event, decay,
 * idle_windows), inlined by name into the passes that include this header
 * (_psa_fast, _crf_psa).
 *
 * Why: GCC's default limits leave these inline functions out of line in
 * the passes (the walk is large and called from several places), passing
 * each block's fields through memory; inlined, the pass keeps them in
 * registers. Raising GCC's limits for the whole module does the same but
 * inlines everything everywhere and makes the module several times slower
 * to compile; marking the few functions costs nothing elsewhere.
 *
 * How: Cython gives an inline function of a .pxd no attribute, so this
 * header declares Cython's C functions again, by their generated names,
 * with always_inline. A C declaration may add an attribute to a function
 * defined later; its parameter types may be incomplete here (Cython
 * defines the structs after the includes). A prototype that no longer
 * matches Cython's (a changed signature) fails to compile, so it cannot
 * silently stop applying; a renamed function leaves a declaration without
 * a definition, which GCC reports (-Wunused-function). Include it only
 * from a module that calls all four specialisations of each function.
 */
#ifndef SKSO_LAZY_INLINE_H
#define SKSO_LAZY_INLINE_H

#include <Python.h> /* Py_ssize_t */

#include "_psa_math.h" /* SKSO_ALWAYS_INLINE */

#define SKSO_LAZY_T(name) struct __pyx_t_19sklearn_secondorder_5_core_11_lazy_steps_##name
#define SKSO_LAZY_FN(name) __pyx_f_19sklearn_secondorder_5_core_11_lazy_steps_##name
/* the records' types and accessors (_lazy_records.pxd) */
#define SKSO_RECORDS_T(name) struct __pyx_t_19sklearn_secondorder_5_core_13_lazy_records_##name
#define SKSO_RECORDS_FN(name) __pyx_f_19sklearn_secondorder_5_core_13_lazy_records_##name
/* the specialisation (penalty p, rate rule r) of fused function name */
#define SKSO_LAZY_FUSED(p, r, name)                                                               \
    __pyx_fuse_##p##_##r##__pyx_f_19sklearn_secondorder_5_core_11_lazy_steps_##name

SKSO_RECORDS_T(Block);
SKSO_RECORDS_T(Layout);
SKSO_LAZY_T(LazyCore);
SKSO_LAZY_T(L2Only);
SKSO_LAZY_T(WithL1);
SKSO_LAZY_T(SeriesRate);
SKSO_LAZY_T(Log1pRate);

SKSO_ALWAYS_INLINE void SKSO_LAZY_FN(apply_event)(SKSO_RECORDS_T(Block), Py_ssize_t, int,
                                                  SKSO_LAZY_T(LazyCore) const *);
SKSO_ALWAYS_INLINE SKSO_RECORDS_T(Block)
    SKSO_RECORDS_FN(block_at)(SKSO_RECORDS_T(Layout) const *, Py_ssize_t);
SKSO_ALWAYS_INLINE SKSO_RECORDS_T(Block)
    SKSO_RECORDS_FN(record_fields)(char *, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                   Py_ssize_t, Py_ssize_t);
SKSO_ALWAYS_INLINE int SKSO_LAZY_FN(still)(SKSO_RECORDS_T(Block), Py_ssize_t);
SKSO_ALWAYS_INLINE long long SKSO_LAZY_FN(floor_div)(long long, SKSO_LAZY_T(LazyCore) const *);
SKSO_ALWAYS_INLINE double SKSO_LAZY_FN(decay_exp)(double);
SKSO_ALWAYS_INLINE double SKSO_LAZY_FN(decay_expm1)(double);
SKSO_ALWAYS_INLINE double SKSO_LAZY_FN(psa_factor)(double, double, SKSO_LAZY_T(LazyCore) const *);

/* decay, idle_windows, catch_up (b, n, k, lam, l1, c, pen, rule), walk and
 * touch (b, n, tau, T, lam, l1, c, pen, rule) for one (penalty, rate rule)
 * pair; flush_block (L, j, regularized, T, c, pen, rule) */
#define SKSO_LAZY_WALK_INLINE(p, r, P, R)                                                         \
    SKSO_ALWAYS_INLINE void SKSO_LAZY_FUSED(p, r, decay)(                                         \
        SKSO_RECORDS_T(Block), Py_ssize_t, long long, double, double,                             \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *);           \
    SKSO_ALWAYS_INLINE void SKSO_LAZY_FUSED(p, r, idle_windows)(                                  \
        SKSO_RECORDS_T(Block), Py_ssize_t, long long, double, double,                             \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *);           \
    SKSO_ALWAYS_INLINE void SKSO_LAZY_FUSED(p, r, catch_up)(                                      \
        SKSO_RECORDS_T(Block), Py_ssize_t, long long, double, double,                             \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *);           \
    SKSO_ALWAYS_INLINE int SKSO_LAZY_FUSED(p, r, flush_block)(                                    \
        SKSO_RECORDS_T(Layout) const *, Py_ssize_t, int, long long,                               \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *);           \
    SKSO_ALWAYS_INLINE void SKSO_LAZY_FUSED(p, r, walk)(                                          \
        SKSO_RECORDS_T(Block), Py_ssize_t, long long, long long, double, double,                  \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *);           \
    SKSO_ALWAYS_INLINE void SKSO_LAZY_FUSED(p, r, touch)(                                         \
        SKSO_RECORDS_T(Block), Py_ssize_t, long long, long long, double, double,                  \
        SKSO_LAZY_T(LazyCore) const *, SKSO_LAZY_T(P) const *, SKSO_LAZY_T(R) const *)

SKSO_LAZY_WALK_INLINE(0, 0, L2Only, SeriesRate);
SKSO_LAZY_WALK_INLINE(0, 1, L2Only, Log1pRate);
SKSO_LAZY_WALK_INLINE(1, 0, WithL1, SeriesRate);
SKSO_LAZY_WALK_INLINE(1, 1, WithL1, Log1pRate);

#endif /* SKSO_LAZY_INLINE_H */
