/* The scalar arithmetic of PSA and of the lazy L2 decay, one home each.
 *
 * Every path calls these: the scalar catch-up and sweep of LazyStepWeights
 * (through the inline wrappers of _weights.pxd), the vectorised event loops
 * of _sweep_k1.h and the block loops of _block_ops.h. They are static inline
 * and branch-free where the vector loops need it, so GCC still vectorises the
 * callers; the extensions are built with -ffp-contract=off, so every caller
 * rounds alike (the scalar and vector paths give the same bits).
 */
#ifndef SKSO_PSA_MATH_H
#define SKSO_PSA_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(z) for |z| < 5e-4: Taylor to z^4 (error < |z|^5 / 120 < 3e-19, below
 * the rounding of the eager product (1 - x)^k it stands for). The decay
 * (1 - eta lam)^k = exp(k rate) of k untouched steps, in its common regime. */
static inline double skso_decay_taylor(double z) {
    return 1.0 + z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0))));
}

/* exp(z) for |z| < 1e-3: Taylor to z^6 (error < |z|^7 / 5040). */
static inline double skso_exp_taylor6(double z) {
    return 1.0 + z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0 + z * (
        1.0 / 120.0 + z / 720.0)))));
}

/* exp(z) without a library call, so that loops over it vectorise (libm's exp
 * does not): z = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite, fdlibm's split
 * of ln2, so n ln2_hi is exact), exp(r) by its Taylor polynomial to r^13
 * (remainder < 4e-18), times 2^n put into the exponent bits. Within 2 ulp of
 * the correctly rounded exp (tests/test_core.py). 0 below -708 (where exp
 * is below 4e-308), so the decay factor of a weight whose eta lam >= 1 is 0. */
static inline double skso_exp(double z) {
    const double log2e = 1.4426950408889634;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double shifter = 6755399441055744.0;             /* 1.5 * 2^52 */
    double zc = z < -708.0 ? -708.0 : z;
    zc = zc > 709.0 ? 709.0 : zc;
    double n = (zc * log2e + shifter) - shifter;           /* nearest integer */
    double r = (zc - n * ln2_hi) - n * ln2_lo;
    /* Estrin's scheme: a short dependency chain (the scalar path's latency) */
    double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    double a0 = 1.0 + r, a1 = 1.0 / 2.0 + r * (1.0 / 6.0), a2 = 1.0 / 24.0 + r * (1.0 / 120.0);
    double a3 = 1.0 / 720.0 + r * (1.0 / 5040.0), a4 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
    double a5 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0);
    double a6 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
    double b0 = a0 + r2 * a1, b1 = a2 + r2 * a3, b2 = a4 + r2 * a5;
    double p = (b0 + r4 * b1) + r8 * (b2 + r4 * a6);
    /* 2^n: the low bits of 2^52 + (n + 1023) shifted into the exponent field */
    double e = n + (1023.0 + 4503599627370496.0), scale;
    int64_t bits;
    memcpy(&bits, &e, sizeof bits);
    bits <<= 52;
    memcpy(&scale, &bits, sizeof scale);
    return z < -708.0 ? 0.0 : p * scale;
}

/* exp(z): skso_exp_taylor6 for |z| < 1e-3, libm's exp otherwise (a decay
 * over many steps or whole idle windows of a binary model). */
static inline double skso_small_exp(double z) {
    if (-1e-3 < z && z < 1e-3)
        return skso_exp_taylor6(z);
    return exp(z);
}

/* skso_small_exp with skso_exp for libm's: the exp of multi-output blocks,
 * whose vector loops (_block_ops.h) select between the same two, so that
 * the scalar and vector paths of such a model give the same bits. */
static inline double skso_small_exp_v(double z) {
    if (-1e-3 < z && z < 1e-3)
        return skso_exp_taylor6(z);
    return skso_exp(z);
}

/* log(1 - x) for 0 <= x < 1e-4: the series -(x + x^2/2 + x^3/3 + x^4/4)
 * (relative error < x^4 / 5, below rounding). The decay log-rate of a
 * weight, x = eta lam. */
static inline double skso_log_decay_series(double x) {
    return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0 + x * 0.25)));
}

/* PSA's step-size factor (Hsu et al., Algorithm 1) from the ratio u of the
 * snapshot differences, u = (w(t+2b) - w(t+b)) / (w(t+b) - w(t)) (Eq. 6):
 *     u <- sign(u) min(|u|, kappa)                              (Eq. 7)
 *     f  = (m + u) / (m + kappa + n),  inv_denom = 1 / (m + kappa + n)  (Eq. 9)
 * with m, n from (alpha, beta, kappa) by Eq. 10, so f lies in [beta, alpha];
 * it is clamped to that range (f_lo = beta, f_hi = alpha), its exact image,
 * so the last-ulp rounding cannot leave it. u = +-inf (a weight that moved
 * only in the second half) clips to +-kappa. u = NaN (0/0: no curvature
 * information) gives NaN: the caller keeps eta (Eq. 8 is eta <- f eta). */
static inline double skso_psa_factor(double u, double m, double kappa, double inv_denom,
                                     double f_lo, double f_hi) {
    u = u > kappa ? kappa : u;
    u = u < -kappa ? -kappa : u;
    double f = (m + u) * inv_denom;
    f = f > f_hi ? f_hi : f;
    f = f < f_lo ? f_lo : f;
    return f;
}

/* The window-end bookkeeping of one weight's step factor f (NaN: no
 * curvature information, eta kept): returns the factor applied, g = f or 1,
 * and folds it into the running extremes lo (of g) and hi (of f, 0 when
 * kept), kept as bit patterns (positive doubles order as them, which the
 * vector loops of _sweep_k1.h and _block_ops.h reduce). */
static inline double skso_applied_factor(double f, int64_t *lo_bits, int64_t *hi_bits) {
    int64_t gb, fb;
    int no_info = f != f;
    double g = no_info ? 1.0 : f;
    f = no_info ? 0.0 : f;
    memcpy(&gb, &g, sizeof gb);
    memcpy(&fb, &f, sizeof fb);
    *lo_bits = gb < *lo_bits ? gb : *lo_bits;
    *hi_bits = fb > *hi_bits ? fb : *hi_bits;
    return g;
}

/* 1 - exp(z) for z <= 0 (its Taylor branch for |z| < 5e-4 alone), the branches of the decay (skso_decay_taylor for
 * |z| < 5e-4, else exp) without their cancellation: the L1 penalty owed
 * over k untouched steps of a weight with L2 decay is C/lam (1 - (1 - eta
 * lam)^k), z = k log(1 - eta lam), the geometric sum of the steps' eta C
 * shrunk by the later decays. */
static inline double skso_one_minus_decay_taylor(double z) {
    return -z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0))));
}

static inline double skso_one_minus_decay(double z) {
    if (z > -5e-4)
        return skso_one_minus_decay_taylor(z);
    return -expm1(z);
}

/* Tsuruoka, Tsujii and Ananiadou (ACL 2009), Fig. 2, ApplyPenalty: the
 * cumulative L1 penalty moves a weight w towards 0 by what it is owed --
 * owed_down = u + q (w > 0), owed_up = u - q (w < 0), u the total penalty
 * so far and q what was applied to this weight -- and clips it at 0. Returns
 * the new weight; the caller adds the change to q. */
static inline double skso_l1_apply(double w, double owed_down, double owed_up) {
    /* (selects, not branches: the sign of a weight is not predictable, and
     * the block loop of _block_ops.h vectorises) */
    double down = w - owed_down, up = w + owed_up;
    down = down > 0.0 ? down : 0.0;
    up = up < 0.0 ? up : 0.0;
    return w > 0.0 ? down : (w < 0.0 ? up : w);
}

#endif
