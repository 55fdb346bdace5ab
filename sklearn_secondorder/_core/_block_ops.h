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

#include <stdint.h>
#include <string.h>

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


/* ---- PSA's events on a multi-output block (LazyStepWeights._catch_up_rows) ----
 * The scalar catch-up's arithmetic weight by weight (_decay_one, _adapt,
 * _skip_param's closed form), with selects for its branches, for blocks whose
 * every eta lam < 1e-4 (log_decay is its series, for the state's lifetime:
 * eta only decreases; the rates are derived from eta, none is stored).
 * snaps holds the (snap0, snap1) pairs. */

/* The decays of a block whose rates are derived from eta (rate_from_eta:
 * every eta lam < 1e-4, so a weight's log-rate is the series of eta lam, as
 * LazyStepWeights.rate_of), k untouched steps: v *= (1 - eta lam)^k.
 * skso_row_decay_taylor_eta when every |k rate| < 5e-4 (decay_factor's
 * Taylor branch), skso_row_decay_eta for any k (decay_factor's branches as
 * selects). */
SKSO_ROW_CLONES
static void skso_row_decay_taylor_eta(double *restrict ve, ptrdiff_t K, double k, double lam) {
    for (ptrdiff_t q = 0; q < K; q++)
        ve[2 * q] *= skso_decay_taylor(k * skso_log_decay_series(ve[2 * q + 1] * lam));
}

SKSO_ROW_CLONES
static void skso_row_decay_eta(double *restrict ve, ptrdiff_t K, double k, double lam) {
    for (ptrdiff_t q = 0; q < K; q++) {
        double z = k * skso_log_decay_series(ve[2 * q + 1] * lam);
        double t = skso_decay_taylor(z);
        double s = (-1e-3 < z) & (z < 1e-3) ? skso_exp_taylor6(z) : skso_exp(z);
        ve[2 * q] *= z > -5e-4 ? t : s;
    }
}

/* Mid-window event: snap1 = v. */
SKSO_ROW_CLONES
static void skso_row_snap1(const double *restrict ve, double *restrict snaps, ptrdiff_t K) {
    for (ptrdiff_t q = 0; q < K; q++)
        snaps[2 * q + 1] = ve[2 * q];
}

/* Window-start record: snap0 = v. */
SKSO_ROW_CLONES
static void skso_row_snap0(const double *restrict ve, double *restrict snaps, ptrdiff_t K) {
    for (ptrdiff_t q = 0; q < K; q++)
        snaps[2 * q] = ve[2 * q];
}

/* Window-end event (ev > 0): eta *= f (Eqs. 6-9, skso_psa_factor; 0/0 keeps
 * eta: a factor of 1, exact), snap0 = v; rates[q] takes the new decay
 * log-rate (the series of eta lam; nothing needs it, but GCC 12 vectorises
 * this loop only with that unit-stride store, -fopt-info-vec). Returns the
 * number of adaptations; *f_min, *f_max take the extreme factors applied (as bit
 * patterns: positive doubles order as them, which vectorises). */
SKSO_ROW_CLONES
static long long skso_row_adapt(double *restrict ve, double *restrict snaps,
                                double *restrict rates, ptrdiff_t K, double lam, double m,
                                double kappa, double inv_denom, double f_lo, double f_hi,
                                double *f_min, double *f_max) {
    int64_t n_adapt = 0, lo_bits, hi_bits;
    memcpy(&lo_bits, f_min, sizeof lo_bits);
    memcpy(&hi_bits, f_max, sizeof hi_bits);
    for (ptrdiff_t q = 0; q < K; q++) {
        double vv = ve[2 * q], s0 = snaps[2 * q], s1 = snaps[2 * q + 1];
        double u = (vv - s1) / (s1 - s0);                  /* Eq. (6); NaN: 0/0 */
        n_adapt += u == u;
        double g = skso_applied_factor(skso_psa_factor(u, m, kappa, inv_denom, f_lo, f_hi),
                                       &lo_bits, &hi_bits);
        double e = ve[2 * q + 1] * g;                      /* Eq. (8) */
        ve[2 * q + 1] = e;
        rates[q] = skso_log_decay_series(e * lam);
        snaps[2 * q] = vv;
    }
    memcpy(f_min, &lo_bits, sizeof lo_bits);
    memcpy(f_max, &hi_bits, sizeof hi_bits);
    return n_adapt;
}

/* k whole idle windows of a block in the clipped regime (_skip_param's closed
 * form, weight by weight), in one call: each weight's series
 * sum_m x^m G_m / m (x = eta lam; LazyStepWeights._clipped_decay, a term at a
 * time for every weight, each stopping where the scalar loop breaks), then a
 * non-zero weight decays by exp(m2b total) (m2b = -2b; small_exp's branches
 * as selects) and its eta by fk = alpha^k, while a zero weight keeps eta
 * (0/0; its decay is of 0); both snapshots = v. p1 = alpha^k - 1 (expm1),
 * geo_den[m] = alpha^m - 1; the G_m / m follow the scalar recurrence
 * P_m = P_(m-1) alpha^k + P_1, G_m = P_m / (alpha^m - 1). scratch holds 4 K
 * doubles. Returns the non-zero weights. */
SKSO_ROW_CLONES
static ptrdiff_t skso_row_skip_closed(double *restrict ve, double *restrict snaps,
                                      double *restrict scratch, ptrdiff_t K, double lam,
                                      double m2b, double p1, const double *restrict geo_den) {
    double *restrict x = scratch, *restrict xm = scratch + K;
    double *restrict total = scratch + 2 * K, *restrict done = scratch + 3 * K;
    double fk = 1.0 + p1, pm = p1;
    int64_t n_open = K, n_moved = 0;
    for (ptrdiff_t q = 0; q < K; q++) {
        x[q] = ve[2 * q + 1] * lam;
        xm[q] = 1.0;
        total[q] = 0.0;
        done[q] = 0.0;
    }
    for (int mm = 1; mm <= 36 && n_open > 0; mm++) {
        if (mm > 1)
            pm = pm * fk + p1;
        double g = pm / geo_den[mm] / mm;                  /* G_m / m */
        n_open = 0;
        for (ptrdiff_t q = 0; q < K; q++) {
            double xn = xm[q] * x[q], term = xn * g, tn = total[q] + term;
            int open = done[q] == 0.0;
            xm[q] = open ? xn : xm[q];
            total[q] = open ? tn : total[q];
            int now_open = open & !(term < 1e-18 * tn);
            done[q] = now_open ? 0.0 : 1.0;
            n_open += now_open;
        }
    }
    for (ptrdiff_t q = 0; q < K; q++) {      /* (the decays: xm is free again) */
        double z = m2b * total[q];
        xm[q] = (-1e-3 < z) & (z < 1e-3) ? skso_exp_taylor6(z) : skso_exp(z);
    }
    for (ptrdiff_t q = 0; q < K; q++) {
        double vv = ve[2 * q];
        int moved = vv != 0.0;
        double nv = vv * xm[q], e = ve[2 * q + 1] * (moved ? fk : 1.0);
        ve[2 * q] = nv;
        ve[2 * q + 1] = e;
        snaps[2 * q] = nv;
        snaps[2 * q + 1] = nv;
        n_moved += moved;
    }
    return (ptrdiff_t)n_moved;
}

#endif
