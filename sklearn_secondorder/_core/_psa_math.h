/* The arithmetic of PSA (Eqs. 6-10), of the lazy L2 decay and of the
 * cumulative L1 penalty, one home each: the lazy core (_lazy_steps.pxd) and
 * ScaledWeights' L1 (_weights.pxd, _block_ops.h) call these. Branch-free
 * where a vector loop calls them.
 */
#ifndef SKSO_PSA_MATH_H
#define SKSO_PSA_MATH_H

#include <math.h>

/* The core's small inline functions are forced inline (always_inline),
 * GCC's default limits aside: each is a few operations on a hot path, and
 * several take an argument (a range, a lane count) that is constant at the
 * call and chooses their branch, which only inlining removes. (The lazy
 * core's Cython functions: _lazy_inline.h.) */
#if defined(__GNUC__) || defined(__clang__)
#define SKSO_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define SKSO_ALWAYS_INLINE static inline
#endif

/* exp(z) for |z| < SKSO_TAYLOR_MAX: Taylor to z^4 (error < |z|^5 / 120 <
 * 3e-19, below the rounding of the eager product (1 - x)^k it stands for).
 * The decay (1 - eta lam)^k = exp(k rate) of k untouched steps, in its
 * common regime. */
#define SKSO_TAYLOR_MAX 5e-4
SKSO_ALWAYS_INLINE double skso_decay_taylor(double z) {
    /* (Estrin's scheme: a touch waits on this chain) */
    double z2 = z * z;
    return (1.0 + z) + z2 * ((0.5 + z * (1.0 / 6.0)) + z2 * (1.0 / 24.0));
}

/* exp(z) - 1 for |z| <= SKSO_EXPM1_POLY_MAX: Taylor to z^8 (relative error < |z|^8 / 9! <
 * 1e-14), a few multiply-adds where libm's exp and expm1 cost a call: the
 * decays and idle windows of a catch-up are mostly in this range. Estrin's
 * scheme: four independent pairs, then two levels, so that the chain a
 * catch-up waits on is four products deep, not eight. */
#define SKSO_EXPM1_POLY_MAX 0.0625
SKSO_ALWAYS_INLINE double skso_expm1_poly(double z) {
    double z2 = z * z, z4 = z2 * z2;
    double a0 = 1.0 + z * (1.0 / 2), a1 = 1.0 / 6 + z * (1.0 / 24);
    double a2 = 1.0 / 120 + z * (1.0 / 720), a3 = 1.0 / 5040 + z * (1.0 / 40320);
    return z * ((a0 + z2 * a1) + z4 * (a2 + z2 * a3));
}

/* exp(z) for -SKSO_EXP_NEG4_MAX <= z <= 0 without a call, for vector
 * loops: the polynomial above at z / 64 (|z / 64| <= 1/16, its range),
 * squared six times (relative error < 64 ulp, about 1.5e-14: the squarings
 * double it each). */
#define SKSO_EXP_NEG4_MAX 4.0
SKSO_ALWAYS_INLINE double skso_exp_neg4(double z) {
    double e = 1.0 + skso_expm1_poly(z * (1.0 / 64));
    e *= e;
    e *= e;
    e *= e;
    e *= e;
    e *= e;
    return e * e;
}

/* log(1 - x) for 0 <= x < SKSO_SERIES_RATE_MAX: the series -(x + x^2/2 +
 * x^3/3) (relative error < x^3 / 4 < 2.5e-13). The decay log-rate of a
 * weight, x = eta lam: the series rate rule (LazyCore.series) takes it for
 * every weight of a call whose largest eta lam is below the bound. */
#define SKSO_SERIES_RATE_MAX 1e-4
SKSO_ALWAYS_INLINE double skso_log_decay_series(double x) {
    return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0)));
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
SKSO_ALWAYS_INLINE double skso_psa_factor(double u, double m, double kappa, double inv_denom,
                                          double f_lo, double f_hi) {
    u = u > kappa ? kappa : u;
    u = u < -kappa ? -kappa : u;
    double f = (m + u) * inv_denom;
    f = f > f_hi ? f_hi : f;
    f = f < f_lo ? f_lo : f;
    return f;
}

/* 1 - exp(z) for z <= 0 by the decay's branches (skso_decay_taylor for
 * |z| < SKSO_TAYLOR_MAX, else exp), without the cancellation of computing 1 - decay;
 * skso_one_minus_decay_taylor is its Taylor branch alone. The L1 penalty
 * owed over k untouched steps of a weight with L2 decay is C/lam (1 - (1 -
 * eta lam)^k), z = k log(1 - eta lam): the geometric sum of the steps' eta C
 * shrunk by the later decays. */
SKSO_ALWAYS_INLINE double skso_one_minus_decay_taylor(double z) {
    return -z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0))));
}

SKSO_ALWAYS_INLINE double skso_one_minus_decay(double z) {
    if (z > -SKSO_TAYLOR_MAX)
        return skso_one_minus_decay_taylor(z);
    return -expm1(z);
}

/* Tsuruoka, Tsujii and Ananiadou (ACL 2009), Fig. 2, ApplyPenalty: the
 * cumulative L1 penalty moves a weight w towards 0 by what it is owed --
 * owed_down = u + q (w > 0), owed_up = u - q (w < 0), u the total penalty
 * so far and q what was applied to this weight -- and clips it at 0. Returns
 * the new weight; the caller adds the change to q. */
SKSO_ALWAYS_INLINE double skso_l1_apply(double w, double owed_down, double owed_up) {
    /* (selects, not branches: the sign of a weight is not predictable, and
     * the block loop of _block_ops.h vectorises) */
    double down = w - owed_down, up = w + owed_up;
    down = down > 0.0 ? down : 0.0;
    up = up < 0.0 ? up : 0.0;
    return w > 0.0 ? down : (w < 0.0 ? up : w);
}

#endif
