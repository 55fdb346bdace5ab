/* The touches of a row's binary weights in the lazy PSA core, eight at a
 * time: each weight brought from the time `last` it is current at to the
 * row's time T, whatever events lie between (_lazy_steps.pxd: `walk`).
 *
 * Why a second form of the walk. In a large binary model most touches cross
 * an event, and how many, of which kind, and whether whole windows lie
 * between, is random from one weight to the next: `walk`'s loop and
 * branches cost a mispredicted branch or more a touch and serialise the
 * touches of a row. In the regime that large models live in -- the L2
 * penalty alone, every eta lam < SKSO_SERIES_RATE_MAX and every eta <= eta_clip (the
 * clipped regime, `LazyCore.clipped`) -- a gap has one shape, five parts:
 *
 *   (1) the mid-window snapshot of the window last touched, if ahead;
 *   (2) that window's end, if at most T: the step-size factor (Eqs. 6-9);
 *   (3) whole idle windows: eta *= alpha^n, one decay (`idle_windows`);
 *   (4) the current window's mid-window snapshot, if T is past it;
 *   (5) the decay to T.
 *
 * Every part is computed for every weight -- a part that does not occur is
 * a decay of 0 steps and a kept field -- so the eight lanes are one
 * branch-free loop that GCC vectorises (AVX-512 / AVX2 clones). The
 * arithmetic is `walk`'s but for the exponential, one polynomial for the
 * group's range of exponents (skso_series_decay's ranges), and the ratio of
 * Eq. 6, a division clipped to +-kappa (`psa_factor` avoids the division
 * when it would clip). Weights whose gap exceeds the polynomials' range (an
 * exponent below -4) are left to `walk` (the caller).
 *
 * Times are doubles: exact below 2^52, like `floor_div`.
 */
#ifndef SKSO_BINARY_GAPS_H
#define SKSO_BINARY_GAPS_H

#include <math.h>
#include <stddef.h>

#include "_block_ops.h"
#include "_prefetch.h"

/* What the gaps need of a kernel call's LazyCore and of the record layout
 * (_lazy_steps.pxd). */
typedef struct {
    double b, inv_b, lam, rate_max, log_alpha, g1, g2;
    double m, kappa, inv_denom, f_lo, f_hi;
    ptrdiff_t stride, off_v, off_eta, off_dsnap, off_snap;
} skso_gap_consts;

#define SKSO_GAP_LANES 8

/* floor(x / b) for 0 <= x < 2^52 (floor_div). */
SKSO_ALWAYS_INLINE double skso_gap_floor_div(double x, const skso_gap_consts *c) {
    double q = floor(x * c->inv_b);
    q = q * c->b > x ? q - 1.0 : q;
    return (q + 1.0) * c->b <= x ? q + 1.0 : q;
}

/* The eight lanes' gaps: the exponents of parts (1), (2), (4) and (5), each
 * within 2b steps, in `near` (skso_decay_range's ranges), those of the idle windows (3) in `far`.
 */
SKSO_ALWAYS_INLINE void skso_gap_lanes(double *restrict v, double *restrict snap,
                                       double *restrict eta, double *restrict dsnap,
                                       const double *restrict tau, double T, double ev,
                                       const skso_gap_consts *c, int near, int far) {
    for (int l = 0; l < SKSO_GAP_LANES; l++) {
        double t0 = tau[l], w = v[l], s = snap[l], e = eta[l], ds = dsnap[l];
        int crossing = t0 < ev;
        double q = skso_gap_floor_div(t0, c) + 1.0;         /* the first event */
        int mid_first = crossing & (q - 2.0 * floor(0.5 * q) == 1.0);
        /* (1) */
        double t1 = mid_first ? q * c->b : t0;
        w *= skso_series_decay((float)e, c->lam, t1 - t0, near);
        ds = mid_first ? (double)(float)(w - s) : ds;
        s = mid_first ? w : s;
        /* (2) */
        double t2 = (q + (mid_first ? 1.0 : 0.0)) * c->b;
        int has_end = crossing & (t2 <= T);
        t2 = has_end ? t2 : T;
        w *= skso_series_decay((float)e, c->lam, t2 - t1, near);
        double f = skso_psa_factor((w - s) / ds, c->m, c->kappa, c->inv_denom, c->f_lo, c->f_hi);
        f = has_end & (f == f) ? f : 1.0;
        e = (double)(float)(e * f);
        s = has_end ? w : s;
        /* (3) */
        double n_win = floor(0.5 * skso_gap_floor_div(T - t2, c));
        double z = n_win * c->log_alpha;
        double p1 = z >= -SKSO_EXPM1_POLY_MAX ? -skso_expm1_poly(z) : 1.0 - skso_exp_neg4(z);
        p1 = w != 0.0 ? p1 : 0.0;
        double x = e * c->lam;
        double zi = -2.0 * c->b * (x * p1 * (c->g1 + x * (2.0 - p1) * c->g2));
        w *= far == 0 ? skso_decay_taylor(zi)
                      : (far == 1 ? 1.0 + skso_expm1_poly(zi) : skso_exp_neg4(zi));
        e = (double)(float)(e * (1.0 - p1));
        s = p1 != 0.0 ? w : s;
        double t3 = t2 + 2.0 * c->b * n_win;
        /* (4) */
        int has_mid = has_end & (T - t3 >= c->b);
        double k = has_mid ? c->b : 0.0;
        w *= skso_series_decay((float)e, c->lam, k, near);
        ds = has_mid ? (double)(float)(w - s) : ds;
        s = has_mid ? w : s;
        /* (5) */
        w *= skso_series_decay((float)e, c->lam, T - t3 - k, near);
        v[l] = w;
        snap[l] = s;
        eta[l] = e;
        dsnap[l] = ds;
    }
}

/* Blocks idx[0..n) of a binary state (records at base + j * stride), each
 * brought to T (`ev`: the latest event time <= T), eight at a time. The
 * blocks whose gap is out of the polynomials' range are not written: their
 * indices go to `left` (at most n), for `walk`; returns how many. */
SKSO_ROW_CLONES
static ptrdiff_t skso_binary_gaps(char *base, const int *idx, ptrdiff_t n, double T, double ev,
                                  const skso_gap_consts *c, int *left) {
    ptrdiff_t n_left = 0;
    /* parts (1), (2), (4), (5) each span at most 2b steps */
    int near = skso_decay_range(2.0 * c->b * c->rate_max);
    for (ptrdiff_t i0 = 0; i0 < n; i0 += SKSO_GAP_LANES) {
        double v[SKSO_GAP_LANES], snap[SKSO_GAP_LANES], eta[SKSO_GAP_LANES];
        double dsnap[SKSO_GAP_LANES], tau[SKSO_GAP_LANES];
        char *rec[SKSO_GAP_LANES];
        double span = 0.0;
        /* the records two groups ahead (a long list, as a shared round's,
         * is mostly cold) */
        for (ptrdiff_t i = i0 + 2 * SKSO_GAP_LANES; i < n && i < i0 + 3 * SKSO_GAP_LANES; i++)
            SKSO_PREFETCH_WRITE(base + (ptrdiff_t)idx[i] * c->stride);
        for (int l = 0; l < SKSO_GAP_LANES; l++) {
            /* (a short group repeats its last block; only its own lanes are written) */
            ptrdiff_t i = i0 + l < n ? i0 + l : n - 1;
            rec[l] = base + (ptrdiff_t)idx[i] * c->stride;
            tau[l] = (double)*(const long long *)rec[l];
            v[l] = *(const double *)(rec[l] + c->off_v);
            snap[l] = *(const double *)(rec[l] + c->off_snap);
            eta[l] = (double)*(const float *)(rec[l] + c->off_eta);
            dsnap[l] = (double)*(const float *)(rec[l] + c->off_dsnap);
            span = T - tau[l] > span ? T - tau[l] : span;
        }
        /* every exponent of a gap is at most its length times the call's
         * largest rate (eta only decreases), and alpha^n_win within exp_neg4's
         * range too when the windows are */
        double bound = span * c->rate_max;
        double wins = 0.5 * span * c->inv_b * -c->log_alpha;
        int far = skso_decay_range(bound);
        switch (near > far ? near * 3 + near : near * 3 + far) {
        case 0: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 0, 0); break;
        case 1: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 0, 1); break;
        case 2: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 0, 2); break;
        case 4: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 1, 1); break;
        case 5: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 1, 2); break;
        default: skso_gap_lanes(v, snap, eta, dsnap, tau, T, ev, c, 2, 2);
        }
        int all_in = bound <= SKSO_EXP_NEG4_MAX && wins <= SKSO_EXP_NEG4_MAX;
        for (int l = 0; l < SKSO_GAP_LANES && i0 + l < n; l++) {
            if (!all_in && ((T - tau[l]) * c->rate_max > SKSO_EXP_NEG4_MAX ||
                            0.5 * (T - tau[l]) * c->inv_b * -c->log_alpha > SKSO_EXP_NEG4_MAX)) {
                left[n_left++] = idx[i0 + l];
                continue;
            }
            *(long long *)rec[l] = (long long)T;
            *(double *)(rec[l] + c->off_v) = v[l];
            *(double *)(rec[l] + c->off_snap) = snap[l];
            *(float *)(rec[l] + c->off_eta) = (float)eta[l];
            *(float *)(rec[l] + c->off_dsnap) = (float)dsnap[l];
        }
    }
    return n_left;
}

#endif
