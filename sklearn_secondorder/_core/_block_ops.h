/* The cumulative L1 penalty's catch-up of one feature's n_outputs weights
 * (ScaledWeights.l1_apply_rows), written with one restrict pointer per array
 * and ptrdiff_t counters so that GCC vectorises it; with GCC >= 11 on x86-64
 * Linux it is compiled for AVX-512, AVX2 and baseline x86-64
 * (target_clones); the extensions are built with -ffp-contract=off, so
 * every version gives the scalar loop's bits. */
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
