/* PSA events on blocks of one weight (n_outputs = 1), for
 * LazyStepWeights.sweep_all (_weights.pyx): the same arithmetic as
 * LazyStepWeights.sweep and catch_up, written without data-dependent branches
 * or calls so that the compiler vectorises it. With GCC on x86-64 Linux each function is compiled
 * for AVX-512, AVX2 and baseline x86-64 (target_clones, GCC >= 11; the loader picks the
 * best the CPU has). The extensions are built with -ffp-contract=off, so no
 * clone fuses a multiply-add and all of them round alike.
 *
 * Preconditions (checked by the caller):
 * - 0 <= ev - last[j] < 2^52, and |(ev - last[j]) rate_j| < 5e-4, so the
 *   decay (1 - eta lam)^k = exp(k rate_j) is decay_factor's Taylor branch;
 * - eta[j] lam < 1e-4, so log_decay is its series branch: the decay
 *   log-rate rate_j is skso_log_decay_series(eta[j] lam_j), computed here
 *   from eta (LazyStepWeights.rate_from_eta), lam_j = 0 for the block
 *   `unregularized` (the intercept; -1 for none).
 *
 * Layout: ve = (v, eta) pairs, snaps = (snap0, snap1) pairs, as in
 * LazyStepWeights.
 */
#ifndef SKSO_SWEEP_K1_H
#define SKSO_SWEEP_K1_H

#include <stdint.h>
#include <string.h>

#include "_psa_math.h"

#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) \
    && defined(__linux__)
#define SKSO_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SKSO_CLONES
#endif

/* (double) k for 0 <= k < 2^52, through the bits of 2^52 + k (vectorises
 * without 64-bit integer conversions) */
static inline double skso_small_int_to_double(long long k) {
    double d;
    int64_t bits = k | (int64_t)0x4330000000000000LL;
    memcpy(&d, &bits, sizeof d);
    return d - 4503599627370496.0;
}

/* The decay log-rate of block j (see the preconditions). */
static inline double skso_rate_k1(const double *ve, Py_ssize_t j, double lam,
                                  Py_ssize_t unregularized) {
    return skso_log_decay_series(ve[2 * j + 1] * (j == unregularized ? 0.0 : lam));
}

/* Mid-window event: decay every weight to ev and record snap1. */
SKSO_CLONES
static void skso_sweep_mid_k1(double *restrict ve, double *restrict snaps,
                              long long *restrict last, long long *restrict next_event,
                              Py_ssize_t n, long long ev, long long b, double lam,
                              Py_ssize_t unregularized) {
    for (Py_ssize_t j = 0; j < n; j++) {
        double z = skso_small_int_to_double(ev - last[2 * j]) * skso_rate_k1(ve, j, lam,
                                                                         unregularized);
        double vv = ve[2 * j] * skso_decay_taylor(z);
        ve[2 * j] = vv;
        snaps[2 * j + 1] = vv;
        last[2 * j] = ev;
        next_event[2 * j] = ev + b;
    }
}

/* Window-end event (ev > 0): decay to ev, adapt eta (skso_psa_factor; 0/0 keeps it),
 * record snap0.
 * Returns the number of adaptations; *f_min, *f_max take the extreme factors
 * (positive doubles order as their bit patterns, which vectorises). */
SKSO_CLONES
static long long skso_sweep_end_k1(double *restrict ve, double *restrict snaps,
                                 long long *restrict last, long long *restrict next_event,
                                 Py_ssize_t n, long long ev, long long b, double lam,
                                 Py_ssize_t unregularized, double m, double kappa, double inv_denom,
                                 double f_lo, double f_hi, double *f_min, double *f_max) {
    int64_t n_adapt = 0, lo_bits, hi_bits;
    memcpy(&lo_bits, f_min, sizeof lo_bits);
    memcpy(&hi_bits, f_max, sizeof hi_bits);
    for (Py_ssize_t j = 0; j < n; j++) {
        double z = skso_small_int_to_double(ev - last[2 * j]) * skso_rate_k1(ve, j, lam,
                                                                         unregularized);
        double vv = ve[2 * j] * skso_decay_taylor(z);
        double s0 = snaps[2 * j], s1 = snaps[2 * j + 1];
        double u = (vv - s1) / (s1 - s0);                 /* Eq. (6); NaN: 0/0 */
        n_adapt += u == u;
        double g = skso_applied_factor(skso_psa_factor(u, m, kappa, inv_denom, f_lo, f_hi),
                                       &lo_bits, &hi_bits);
        double e = ve[2 * j + 1] * g;                     /* Eq. (8) */
        ve[2 * j] = vv;
        ve[2 * j + 1] = e;
        snaps[2 * j] = vv;
        last[2 * j] = ev;
        next_event[2 * j] = ev + b;
    }
    memcpy(f_min, &lo_bits, sizeof lo_bits);
    memcpy(f_max, &hi_bits, sizeof hi_bits);
    return n_adapt;
}

#endif
