/* Loops over the n_outputs weights of one LazyStepWeights block (a CRF
 * attribute row: n_states weights), on the interleaved (v, eta) pairs. They
 * are the scalar code's arithmetic, operation for operation, written with
 * one restrict pointer per array and ptrdiff_t counters (Python builds with
 * -fwrapv, under which an int counter in 2 * q stops GCC's vectoriser; and
 * v, eta as two pointers into one buffer would fail its overlap check), so
 * that GCC vectorises them. With GCC >= 11 on x86-64 Linux each is compiled
 * for AVX-512, AVX2 and baseline x86-64 (target_clones, as _sweep_k1.h); the
 * extensions are built with -ffp-contract=off, so every version gives the
 * scalar loops' bits.
 */
#ifndef SKSO_BLOCK_OPS_H
#define SKSO_BLOCK_OPS_H

#include <stddef.h>

#include "_psa_math.h"

#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) \
    && defined(__linux__)
#define SKSO_ROW_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SKSO_ROW_CLONES
#endif

/* k untouched steps, v *= (1 - eta lam)^k = exp(k rate), when every
 * |k rate| < 5e-4: decay_factor's Taylor branch for each weight. */
SKSO_ROW_CLONES
static void skso_row_decay_taylor(double *restrict ve, const double *restrict rate,
                                  ptrdiff_t K, double k) {
    for (ptrdiff_t q = 0; q < K; q++) {
        ve[2 * q] *= skso_decay_taylor(k * rate[q]);
    }
}

/* Emission scores of one attribute: em[h] += x v[h]. */
SKSO_ROW_CLONES
static void skso_row_emit(double *restrict em, const double *restrict ve, double x,
                          ptrdiff_t K) {
    for (ptrdiff_t h = 0; h < K; h++)
        em[h] += x * ve[2 * h];
}

/* The shrink of one update: v *= max(0, 1 - eta lam). */
SKSO_ROW_CLONES
static void skso_row_shrink(double *restrict ve, double lam, ptrdiff_t K) {
    for (ptrdiff_t h = 0; h < K; h++) {
        double c = 1.0 - ve[2 * h + 1] * lam;
        ve[2 * h] *= c > 0.0 ? c : 0.0;
    }
}

/* The gradient term of one token's attribute: v[h] += eta[h] x d[h]. */
SKSO_ROW_CLONES
static void skso_row_step(double *restrict ve, double x, const double *restrict d,
                          ptrdiff_t K) {
    for (ptrdiff_t h = 0; h < K; h++)
        ve[2 * h] += ve[2 * h + 1] * x * d[h];
}

/* skso_row_step on the weights that exist: mask[h] is 1 where weight h
 * exists, 0 where it does not (a multiplication, so the loop stays
 * branch-free and vectorised). */
SKSO_ROW_CLONES
static void skso_row_step_masked(double *restrict ve, double x, const double *restrict d,
                                 const unsigned char *restrict mask, ptrdiff_t K) {
    for (ptrdiff_t h = 0; h < K; h++)
        ve[2 * h] += ve[2 * h + 1] * x * d[h] * (double)mask[h];
}

/* Line 5 of Algorithm 1 for one row of a multi-output linear model:
 * v[k] = max(0, 1 - eta[k] lam) v[k] - eta[k] sw grad[k] x. */
SKSO_ROW_CLONES
static void skso_row_shrink_step(double *restrict ve, double lam, double sw,
                                 const double *restrict grad, double x, ptrdiff_t K) {
    for (ptrdiff_t k = 0; k < K; k++) {
        double c = 1.0 - ve[2 * k + 1] * lam;
        c = c < 0.0 ? 0.0 : c;
        ve[2 * k] = c * ve[2 * k] - ve[2 * k + 1] * sw * grad[k] * x;
    }
}

/* k untouched steps of a block with the L1 penalty (decay_weight_l1) when
 * every |k rate| < 5e-4: the decay's and the penalty's Taylor branches, then
 * the clip; owed holds (u + q, u - q) per weight, c_over_lam = C / lam. */
SKSO_ROW_CLONES
static void skso_row_decay_l1_taylor(double *restrict ve, double *restrict owed,
                                     const double *restrict rate, ptrdiff_t K, double k,
                                     double c_over_lam) {
    for (ptrdiff_t q = 0; q < K; q++) {
        double z = k * rate[q], f = skso_decay_taylor(z);
        double o = c_over_lam * skso_one_minus_decay_taylor(z);
        double w = ve[2 * q] * f;
        double dn = owed[2 * q] * f + o, up = owed[2 * q + 1] * f + o;
        double nv = skso_l1_apply(w, dn, up);
        owed[2 * q] = dn + (nv - w);
        owed[2 * q + 1] = up - (nv - w);
        ve[2 * q] = nv;
    }
}

/* Line 5 of Algorithm 1 for one row of a multi-output linear model, then the
 * step's L1 penalty eta C (l1_penalize): v = max(0, 1 - eta lam) v - eta sw
 * grad x, (u + q, u - q) shrunk by the same factor plus eta C, the clip. */
SKSO_ROW_CLONES
static void skso_row_step_l1(double *restrict ve, double *restrict owed, double lam,
                             double sw, const double *restrict grad, double x, double l1,
                             ptrdiff_t K) {
    for (ptrdiff_t k = 0; k < K; k++) {
        double e = ve[2 * k + 1], c = 1.0 - e * lam;
        c = c < 0.0 ? 0.0 : c;
        double w = c * ve[2 * k] - e * sw * grad[k] * x;
        double o = e * l1;
        double dn = owed[2 * k] * c + o, up = owed[2 * k + 1] * c + o;
        double nv = skso_l1_apply(w, dn, up);
        owed[2 * k] = dn + (nv - w);
        owed[2 * k + 1] = up - (nv - w);
        ve[2 * k] = nv;
    }
}

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

#endif
