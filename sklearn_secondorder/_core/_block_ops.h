/* Loops over the weights of one wide block: a multi-output feature's K
 * weights (ScaledWeights' L1 catch-up), a CRF attribute row's n_states
 * weights in the lazy PSA core (_lazy_steps.pxd, _crf_psa.pyx), whose
 * records keep each field as a contiguous run. They are written with one
 * restrict pointer per array and ptrdiff_t counters so that GCC vectorises
 * them; with GCC >= 11 on x86-64 Linux each is compiled for AVX-512, AVX2
 * and baseline x86-64 (target_clones) and the loader picks one. The
 * extensions are built with -ffp-contract=off, so every version gives the
 * scalar loop's bits. A binary weight (a block of one) takes the scalar
 * inline code: a call through the clones' resolver would cost more than its
 * arithmetic. */
#ifndef SKSO_BLOCK_OPS_H
#define SKSO_BLOCK_OPS_H

#include <stddef.h>

#include "_psa_math.h"

#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) &&          \
    defined(__linux__)
#define SKSO_ROW_CLONES                                                                           \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SKSO_ROW_CLONES
#endif

/* Tsuruoka et al.'s L1 catch-up (skso_l1_apply) of the K weights of one
 * feature of a ScaledWeights: u the total penalty and q[k] the penalty
 * applied, both in the units of v; q takes the change. With averaging
 * (avg != NULL) the running sum keeps the past iterates: avg[k] -= c * change. */
SKSO_ROW_CLONES
static void skso_row_l1_apply(double *restrict v, double *restrict q, double *restrict avg,
                              double u, double c, ptrdiff_t K) {
    if (avg == NULL) {
        for (ptrdiff_t k = 0; k < K; k++) {
            double z = v[k], nv = skso_l1_apply(z, u + q[k], u - q[k]);
            q[k] += nv - z;
            v[k] = nv;
        }
        return;
    }
    for (ptrdiff_t k = 0; k < K; k++) {
        double z = v[k], nv = skso_l1_apply(z, u + q[k], u - q[k]);
        q[k] += nv - z;
        avg[k] -= c * (nv - z);
        v[k] = nv;
    }
}

/* The events on one weight of a wide block, the one home of their
 * arithmetic in the block loops: a window's middle (dsnap = v - snap, snap =
 * v), and its end (eta *= f, Eq. 8, f = skso_psa_factor of (v - snap) /
 * dsnap; 0/0 gives NaN, which keeps eta; snap = v). */
SKSO_ALWAYS_INLINE void skso_window_middle(double v, double *snap, float *dsnap) {
    *dsnap = (float)(v - *snap);
    *snap = v;
}

SKSO_ALWAYS_INLINE void skso_window_end(double v, double *snap, float dsnap, float *eta, double m,
                                        double kappa, double inv_denom, double f_lo, double f_hi) {
    double f = skso_psa_factor((v - *snap) / (double)dsnap, m, kappa, inv_denom, f_lo, f_hi);
    *eta = (float)((double)*eta * (f == f ? f : 1.0));
    *snap = v;
}

/* The factor exp(k log(1 - eta lam)) of k idle steps under the series rate
 * rule, by decay_exp's polynomial for the block's bound on |k log(1 - eta
 * lam)| (range 0: below SKSO_TAYLOR_MAX, 1: up to SKSO_EXPM1_POLY_MAX) or
 * skso_exp_neg4 (2: up to SKSO_EXP_NEG4_MAX).
 * Each loop below calls it with a constant range, so that it is branch-free. */
SKSO_ALWAYS_INLINE double skso_series_decay(float eta, double lam, double k, int range) {
    double z = k * skso_log_decay_series((double)eta * lam);
    if (range == 0)
        return skso_decay_taylor(z);
    if (range == 1)
        return 1.0 + skso_expm1_poly(z);
    return skso_exp_neg4(z);
}

/* The range (above) that covers every |k log(1 - eta lam)| <= bound. */
SKSO_ALWAYS_INLINE int skso_decay_range(double bound) {
    return bound < SKSO_TAYLOR_MAX ? 0 : (bound <= SKSO_EXPM1_POLY_MAX ? 1 : 2);
}

/* k idle steps of n weights under the series rate rule (every eta lam <
 * SKSO_SERIES_RATE_MAX) when every |k log(1 - eta lam)| is at most `bound`
 * <= SKSO_EXP_NEG4_MAX:
 * v *= exp(k log(1 - eta lam)) (_lazy_steps.decay). */
SKSO_ROW_CLONES
static void skso_block_decay_series(double *restrict v, const float *restrict eta, double lam,
                                    double k, double bound, ptrdiff_t n) {
    switch (skso_decay_range(bound)) {
    case 0:
        for (ptrdiff_t q = 0; q < n; q++)
            v[q] *= skso_series_decay(eta[q], lam, k, 0);
        break;
    case 1:
        for (ptrdiff_t q = 0; q < n; q++)
            v[q] *= skso_series_decay(eta[q], lam, k, 1);
        break;
    default:
        for (ptrdiff_t q = 0; q < n; q++)
            v[q] *= skso_series_decay(eta[q], lam, k, 2);
    }
}

/* The same decay, then the event it leads to, in one loop: a window's
 * middle ... */
#define SKSO_DECAY_MID(range)                                                                     \
    for (ptrdiff_t q = 0; q < n; q++) {                                                           \
        double nv = v[q] * skso_series_decay(eta[q], lam, k, range);                              \
        skso_window_middle(nv, snap + q, dsnap + q);                                              \
        v[q] = nv;                                                                                \
    }

SKSO_ROW_CLONES
static void skso_block_decay_mid_event(double *restrict v, const float *restrict eta,
                                       double *restrict snap, float *restrict dsnap, double lam,
                                       double k, double bound, ptrdiff_t n) {
    switch (skso_decay_range(bound)) {
    case 0: SKSO_DECAY_MID(0) break;
    case 1: SKSO_DECAY_MID(1) break;
    default: SKSO_DECAY_MID(2)
    }
}

/* ... or its end. */
#define SKSO_DECAY_END(range)                                                                     \
    for (ptrdiff_t q = 0; q < n; q++) {                                                           \
        double nv = v[q] * skso_series_decay(eta[q], lam, k, range);                              \
        skso_window_end(nv, snap + q, dsnap[q], eta + q, m, kappa, inv_denom, f_lo, f_hi);        \
        v[q] = nv;                                                                                \
    }

SKSO_ROW_CLONES
static void skso_block_decay_end_event(double *restrict v, float *restrict eta,
                                       double *restrict snap, const float *restrict dsnap,
                                       double lam, double k, double bound, double m, double kappa,
                                       double inv_denom, double f_lo, double f_hi, ptrdiff_t n) {
    switch (skso_decay_range(bound)) {
    case 0: SKSO_DECAY_END(0) break;
    case 1: SKSO_DECAY_END(1) break;
    default: SKSO_DECAY_END(2)
    }
}

/* Whole idle windows of n weights from a window start, all in the clipped
 * regime, under the series rate rule (_lazy_steps.idle_windows): a
 * non-zero weight decays by exp(2b sum_i log(1 - x alpha^i)) -- the series
 * x p1 (g1 + x (2 - p1) g2) of idle_log_decay, x = eta lam, its exponent at
 * most 4 -- and its eta shrinks by alpha^n_win = 1 - p1; a zero weight keeps
 * eta (0/0). The window restarts: snap = v. */
SKSO_ROW_CLONES
static void skso_block_idle_windows(double *restrict v, float *restrict eta, double *restrict snap,
                                    double lam, double p1, double two_b, double g1, double g2,
                                    ptrdiff_t n) {
    for (ptrdiff_t q = 0; q < n; q++) {
        double x = (double)eta[q] * lam;
        double nv = v[q] * skso_exp_neg4(-two_b * (x * p1 * (g1 + x * (2.0 - p1) * g2)));
        float ne = (float)((double)eta[q] * (1.0 - p1));
        eta[q] = v[q] != 0.0 ? ne : eta[q];
        v[q] = nv;
        snap[q] = nv;
    }
}

/* The emission scores of one attribute: em[h] += x v[h]. */
SKSO_ROW_CLONES
static void skso_block_emit(double *restrict em, const double *restrict v, double x, ptrdiff_t n) {
    for (ptrdiff_t h = 0; h < n; h++)
        em[h] += x * v[h];
}

/* One update's shrink: v *= max(0, 1 - eta lam). */
SKSO_ROW_CLONES
static void skso_block_shrink(double *restrict v, const float *restrict eta, double lam,
                              ptrdiff_t n) {
    for (ptrdiff_t h = 0; h < n; h++) {
        double f = 1.0 - (double)eta[h] * lam;
        v[h] *= f > 0.0 ? f : 0.0;
    }
}

/* The shrink's factors, f[h] = max(0, 1 - eta[h] lam) (skso_block_shrink's),
 * for a small model's eager pass, whose step sizes change only at a window's
 * end: each update's shrink is then skso_block_scale. */
SKSO_ROW_CLONES
static void skso_block_shrink_factors(double *restrict f, const float *restrict eta, double lam,
                                      ptrdiff_t n) {
    for (ptrdiff_t h = 0; h < n; h++) {
        double g = 1.0 - (double)eta[h] * lam;
        f[h] = g > 0.0 ? g : 0.0;
    }
}

/* v[h] *= f[h]. */
SKSO_ROW_CLONES
static void skso_block_scale(double *restrict v, const double *restrict f, ptrdiff_t n) {
    for (ptrdiff_t h = 0; h < n; h++)
        v[h] *= f[h];
}

/* A token's gradient term on one row: v[h] += eta[h] x d[h]. */
SKSO_ROW_CLONES
static void skso_block_add(double *restrict v, const float *restrict eta, double x,
                           const double *restrict d, ptrdiff_t n) {
    for (ptrdiff_t h = 0; h < n; h++)
        v[h] += (double)eta[h] * x * d[h];
}

/* The mid-window event: dsnap = v - snap (float32), snap = v. */
SKSO_ROW_CLONES
static void skso_block_mid_event(const double *restrict v, double *restrict snap,
                                 float *restrict dsnap, ptrdiff_t n) {
    for (ptrdiff_t q = 0; q < n; q++)
        skso_window_middle(v[q], snap + q, dsnap + q);
}

/* The window end: eta *= f (Eq. 8, f = skso_psa_factor of (v - snap) / dsnap;
 * 0/0 gives NaN, which keeps eta), snap = v. */
SKSO_ROW_CLONES
static void skso_block_end_event(const double *restrict v, double *restrict snap,
                                 const float *restrict dsnap, float *restrict eta, double m,
                                 double kappa, double inv_denom, double f_lo, double f_hi,
                                 ptrdiff_t n) {
    for (ptrdiff_t q = 0; q < n; q++)
        skso_window_end(v[q], snap + q, dsnap[q], eta + q, m, kappa, inv_denom, f_lo, f_hi);
}

#endif
