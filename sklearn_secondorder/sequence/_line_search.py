"""liblbfgs's line searches, as ``minimize_lbfgs`` (``_lbfgs_solver``) calls them.

``backtracking``
    Backtracking to the Wolfe or strong Wolfe conditions (liblbfgs's
    ``Backtracking`` / ``StrongBacktracking``).
``owlqn_backtracking``
    OWL-QN's projected backtracking (Andrew and Gao, ICML 2007, Section 3.2),
    the only search liblbfgs allows with an L1 term.
``more_thuente``
    More and Thuente's search (ACM TOMS 20, 1994), liblbfgs's default, with
    its interval-of-uncertainty update and safeguarded cubic steps.

Each takes ``fun: x -> (f, g)``, writes the trial points into ``x`` (from
``xp`` along ``d``) and returns ``(f, g, step, evaluations)`` of the accepted
point, or None when no acceptable step was found.
"""
import numpy as np
from scipy.linalg.blas import ddot

from .._core._owlqn import projected_point

#: liblbfgs's line-search constants (``lbfgs_parameter_t`` defaults)
FTOL, WOLFE, DEC, INC, MIN_STEP, MAX_STEP, XTOL = 1e-4, 0.9, 0.5, 2.1, 1e-20, 1e20, 1e-16


def backtracking(fun, x, xp, fp, gp, d, step, strong, max_ls):
    """liblbfgs's backtracking search: halve the step until Armijo holds,
    then (Wolfe) multiply it by 2.1 while the slope is still too steep, or
    (strong Wolfe) halve it while the slope is too far positive."""
    dginit = float(ddot(gp, d))
    if dginit > 0:
        return None
    dgtest = FTOL * dginit
    for count in range(1, max_ls + 1):
        np.multiply(d, step, out=x)
        x += xp
        f, g = fun(x)
        if not np.isfinite(f) or f > fp + step * dgtest:
            width = DEC
        else:
            dg = float(ddot(g, d))
            if dg < WOLFE * dginit:
                width = INC
            elif strong and dg > -WOLFE * dginit:
                width = DEC
            else:
                return f, g, step, count
        if step < MIN_STEP or step > MAX_STEP:
            return None
        step *= width
    return None


def owlqn_backtracking(fun, c1, x, xp, fp, pgp, d, step, max_ls):
    """OWL-QN's search (Andrew and Gao, Section 3.2): halve the step until the
    projected point ``pi(xp + step d)`` satisfies Armijo with the
    pseudo-gradient, ``f(x) <= f(xp) + 1e-4 (x - xp) . pg``."""
    for count in range(1, max_ls + 1):
        l1, slope = projected_point(x, xp, d, step, pgp)
        f, g = fun(x)
        f += c1 * l1
        if np.isfinite(f) and f <= fp + FTOL * slope:
            return f, g, step, count
        if step < MIN_STEP or step > MAX_STEP:
            return None
        step *= DEC
    return None


def _cubic_step(u, fu, du, v, fv, dv):
    """The minimiser of the cubic through ``(u, fu, du)`` and ``(v, fv, dv)``
    (More and Thuente 1994, Section 4)."""
    d = v - u
    theta = 3.0 * (fu - fv) / d + du + dv
    s = max(abs(theta), abs(du), abs(dv))
    gamma = s * np.sqrt((theta / s) ** 2 - (du / s) * (dv / s))
    if v < u:
        gamma = -gamma
    return u + (gamma - du + theta) / (2.0 * gamma - du + dv) * d


def _cubic_step_safe(u, fu, du, v, fv, dv, lo, hi):
    """As ``_cubic_step`` from ``v``'s side, for slopes of one sign shrinking
    in magnitude: the cubic's minimiser when it lies beyond ``v``, else the
    bound ``lo`` / ``hi`` in the direction of the step."""
    d = v - u
    theta = 3.0 * (fu - fv) / d + du + dv
    s = max(abs(theta), abs(du), abs(dv))
    gamma = s * np.sqrt(max(0.0, (theta / s) ** 2 - (du / s) * (dv / s)))
    if u < v:
        gamma = -gamma
    r = (gamma - dv + theta) / (2.0 * gamma - dv + du)
    if r < 0.0 and gamma != 0.0:
        return v - r * d
    return hi if d > 0 else lo


def _interval_step(best, other, trial, lo, hi, bracketed):
    """One update of the More-Thuente interval of uncertainty (Section 4,
    the four cases) and the next trial step.

    ``best``, ``other`` and ``trial`` are ``(step, f, slope)``: the best
    point so far, the interval's other end, and the point just evaluated.
    Returns ``(best, other, next_step, bracketed)``, or None when the trial
    lies outside the interval or the slope at ``best`` does not descend
    (rounding).
    """
    (sx, fx, dx), (sy, fy, dy), (st, ft, dt) = best, other, trial
    if bracketed and (st <= min(sx, sy) or st >= max(sx, sy) or dx * (st - sx) >= 0.0
                      or hi < lo):
        return None
    opposite = dt * np.sign(dx) < 0.0
    if ft > fx:            # case 1: higher value, the minimum is bracketed
        bracketed, bound = True, True
        cubic = _cubic_step(sx, fx, dx, st, ft, dt)
        quad = sx + dx / ((fx - ft) / (st - sx) + dx) / 2.0 * (st - sx)
        new = cubic if abs(cubic - sx) < abs(quad - sx) else cubic + 0.5 * (quad - cubic)
    elif opposite:         # case 2: lower value, slopes of opposite signs
        bracketed, bound = True, False
        cubic = _cubic_step(sx, fx, dx, st, ft, dt)
        secant = st + dt / (dt - dx) * (sx - st)
        new = cubic if abs(cubic - st) > abs(secant - st) else secant
    elif abs(dt) < abs(dx):  # case 3: lower value, same sign, slope shrinking
        bound = True
        cubic = _cubic_step_safe(sx, fx, dx, st, ft, dt, lo, hi)
        secant = st + dt / (dt - dx) * (sx - st)
        if bracketed:
            new = cubic if abs(st - cubic) < abs(st - secant) else secant
        else:
            new = cubic if abs(st - cubic) > abs(st - secant) else secant
    else:                  # case 4: lower value, same sign, slope not shrinking
        bound = False
        if bracketed:
            new = _cubic_step(st, ft, dt, sy, fy, dy)
        else:
            new = hi if sx < st else lo
    if ft > fx:
        other = trial
    else:
        if opposite:
            other = best
        best = trial
    new = min(max(new, lo), hi)
    if bracketed and bound:
        # stay clear of the far end of the interval
        edge = best[0] + 0.66 * (other[0] - best[0])
        new = min(edge, new) if best[0] < other[0] else max(edge, new)
    return best, other, new, bracketed


def more_thuente(fun, x, xp, fp, gp, d, step, max_ls):
    """More and Thuente's line search (ACM TOMS 20, 1994), liblbfgs's
    default: safeguarded cubic / quadratic steps in an interval of
    uncertainty until the strong Wolfe conditions hold (sufficient decrease
    1e-4, curvature 0.9); in the first stage on the auxiliary function
    ``psi(a) = f(a) - f(0) - 1e-4 a f'(0)``."""
    dginit = float(ddot(gp, d))
    if dginit > 0:
        return None
    dgtest = FTOL * dginit
    bracketed, stage1, ok = False, True, True
    width = MAX_STEP - MIN_STEP
    prev_width = 2.0 * width
    best = other = (0.0, fp, dginit)
    count = 0
    while True:
        if bracketed:
            lo, hi = min(best[0], other[0]), max(best[0], other[0])
        else:
            lo, hi = best[0], step + 4.0 * (step - best[0])
        step = min(max(step, MIN_STEP), MAX_STEP)
        if bracketed and (step <= lo or step >= hi or count + 1 >= max_ls or not ok
                          or hi - lo <= XTOL * hi):
            step = best[0]                  # end at the best point so far
        np.multiply(d, step, out=x)
        x += xp
        f, g = fun(x)
        count += 1
        if not np.isfinite(f):              # overflow: retreat towards the best point
            if count >= max_ls:
                return None
            step = best[0] + 0.5 * (step - best[0])
            continue
        dg = float(ddot(g, d))
        ftest = fp + step * dgtest
        if bracketed and (step <= lo or step >= hi or not ok):
            return None                     # rounding errors prevent progress
        if (step == MAX_STEP and f <= ftest and dg <= dgtest) or (
                step == MIN_STEP and (f > ftest or dg >= dgtest)):
            return None
        if (bracketed and hi - lo <= XTOL * hi) or count >= max_ls:
            return None
        if f <= ftest and abs(dg) <= WOLFE * -dginit:
            return f, g, step, count
        if stage1 and f <= ftest and min(FTOL, WOLFE) * dginit <= dg:
            stage1 = False
        if stage1 and ftest < f <= best[1]:
            # the auxiliary function psi: shift the values by the Armijo line
            shift = [(a, fa - a * dgtest, da - dgtest) for a, fa, da in (best, other)]
            out = _interval_step(shift[0], shift[1], (step, f - step * dgtest, dg - dgtest),
                                 lo, hi, bracketed)
            if out is not None:
                b, o, step, bracketed = out
                best = (b[0], b[1] + b[0] * dgtest, b[2] + dgtest)
                other = (o[0], o[1] + o[0] * dgtest, o[2] + dgtest)
        else:
            out = _interval_step(best, other, (step, f, dg), lo, hi, bracketed)
            if out is not None:
                best, other, step, bracketed = out
        ok = out is not None
        if bracketed:
            if 0.66 * prev_width <= abs(other[0] - best[0]):
                step = best[0] + 0.5 * (other[0] - best[0])
            prev_width, width = width, abs(other[0] - best[0])
