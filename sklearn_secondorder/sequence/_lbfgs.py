"""LBFGSSequenceTagger: full-batch L-BFGS (OWL-QN with L1), CRFsuite's ``lbfgs``.

``minimize_lbfgs`` is the optimiser: the two-loop recursion (Nocedal 1980;
Nocedal and Wright, Algorithm 7.4) in NumPy over BLAS, with OWL-QN's
orthant-wise steps (Andrew and Gao, ICML 2007; ``_core/_owlqn.pyx``) when
there is an L1 term, and the stopping rules and line searches of liblbfgs, the
library CRFsuite's ``lbfgs`` trainer calls. One objective evaluation is one
forward-backward pass over all the sequences in Cython
(``_core/_crf_compact.compact_loglik_gradient``, nogil, on the weights that
exist in CRFsuite's feature set); the per-iteration Python is a
few dozen vector operations.
"""
import time
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from scipy.linalg.blas import daxpy, ddot
from sklearn.utils.metaestimators import available_if
from threadpoolctl import threadpool_limits

from .._compat import Interval, StrOptions
from .._core._crf_compact import compact_loglik_gradient, feature_table
from .._core._owlqn import constrain_direction, l1_norm, projected_point, pseudo_gradient
from .._validation import diverged_error
from ._base import _BaseSequenceTagger
from ._feature_set import observed_weights

#: liblbfgs's line-search constants (``lbfgs_parameter_t`` defaults)
FTOL, WOLFE, DEC, INC, MIN_STEP, MAX_STEP, XTOL = 1e-4, 0.9, 0.5, 2.1, 1e-20, 1e20, 1e-16


@dataclass
class LBFGSResult:
    """What ``minimize_lbfgs`` returns.

    Attributes
    ----------
    x : ndarray
        The last accepted point (the start when no step was accepted).
    fun : float
        The objective there (L1 term included).
    n_iter : int
        Accepted iterations.
    n_evals : int
        Objective / gradient evaluations.
    stop_reason : {'converged', 'delta', 'max_iter', 'linesearch'}
        ``'converged'``: ``||g|| / max(1, ||x||) <= epsilon`` (the
        pseudo-gradient with L1); ``'delta'``: the relative decrease over
        the last ``period`` iterations fell below ``delta``; ``'max_iter'``;
        ``'linesearch'``: no acceptable step along the direction.
    seconds : list of float
        Wall time of each iteration.
    history : list of float
        The objective after each iteration.
    """

    x: np.ndarray
    fun: float
    n_iter: int = 0
    n_evals: int = 0
    stop_reason: str = "max_iter"
    seconds: list = field(default_factory=list)
    history: list = field(default_factory=list)


def _nrm2(v):
    # (BLAS dnrm2 guards against overflow and is several times slower)
    return float(np.sqrt(ddot(v, v)))


def _backtracking(fun, x, xp, fp, gp, d, step, strong, max_ls):
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


def _backtracking_owlqn(fun, c1, x, xp, fp, pgp, d, step, max_ls):
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


def _more_thuente(fun, x, xp, fp, gp, d, step, max_ls):
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


def minimize_lbfgs(fun, x0, **options):
    """Minimise ``fun(x)[0] + c1 ||x||_1`` by L-BFGS (OWL-QN when ``c1 > 0``).

    ``_minimize_lbfgs``'s parameters; its vector operations run on one BLAS
    thread: they are memory-bound level-1 operations, which threads do not
    speed up, and on a busy machine OpenBLAS's thread hand-offs cost more
    than the operations (a 50 000-element dot product took 100 times longer
    on two shared cores).

    Parameters
    ----------
    fun : callable
        ``x -> (f, g)``.
    x0 : ndarray
        The start, updated in place.
    **options : dict
        ``_minimize_lbfgs``'s keyword arguments.

    Returns
    -------
    result : LBFGSResult
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _minimize_lbfgs(fun, x0, **options)


def _minimize_lbfgs(fun, x0, *, c1=0.0, num_memories=6, epsilon=1e-5, period=10,
                   delta=1e-5, max_iter=100, linesearch="MoreThuente", max_linesearch=20,
                   callback=None):
    """Minimise ``fun(x)[0] + c1 ||x||_1`` by L-BFGS (OWL-QN when ``c1 > 0``).

    liblbfgs's algorithm and stopping rules (the library CRFsuite's ``lbfgs``
    calls): the first step is ``1 / ||d||`` along the steepest descent, later
    ones try 1 first; the initial Hessian is ``(y.s / y.y) I`` of the newest
    pair. With ``c1 > 0`` the direction is computed from the pseudo-gradient
    and constrained to its orthant, and the search is OWL-QN's projected
    backtracking (as liblbfgs, which allows no other search with L1). A pair
    with ``y.s <= 0`` (possible without L2) is not stored.

    Parameters
    ----------
    fun : callable
        ``x -> (f, g)``, the smooth part and its gradient (``g`` may be
        modified by the optimiser).
    x0 : ndarray of shape (n,)
        The start; updated in place and returned as ``result.x``.
    c1 : float, default=0.0
        The L1 coefficient.
    num_memories : int, default=6
        Pairs ``(s, y)`` kept.
    epsilon : float, default=1e-5
        Stop when ``||g|| / max(1, ||x||) <= epsilon``.
    period : int, default=10
        Stop when ``|f(x_{k - period}) - f(x_k)| / f(x_k) < delta`` (0: off).
    delta : float, default=1e-5
    max_iter : int, default=100
    linesearch : {'MoreThuente', 'Backtracking', 'StrongBacktracking'}
        Without L1: More and Thuente's search (strong Wolfe conditions), or
        backtracking to the Wolfe / strong Wolfe conditions.
    max_linesearch : int, default=20
        Evaluations per line search.
    callback : callable or None
        ``callback(k, x, f)`` after each iteration.

    Returns
    -------
    result : LBFGSResult
    """
    x = x0
    n, m, owl = x.size, num_memories, c1 > 0
    f, g = fun(x)
    n_evals = 1
    pg = np.empty(n) if owl else g
    if owl:
        f += c1 * l1_norm(x)
        pseudo_gradient(x, g, c1, pg)
    res = LBFGSResult(x=x, fun=f, n_evals=1)
    if not np.isfinite(f):
        res.stop_reason = "linesearch"
        return res
    past = [f] * max(period, 1)
    d = -pg
    if _nrm2(pg) / max(_nrm2(x), 1.0) <= epsilon:
        res.stop_reason = "converged"
        return res
    step = 1.0 / _nrm2(d)
    S, Y = np.empty((m, n)), np.empty((m, n))
    rho, coef = np.zeros(m), np.zeros(m)
    n_pairs, end = 0, 0
    xp, gp = np.empty(n), np.empty(n)
    t_start = time.perf_counter()
    for k in range(1, max_iter + 1):
        np.copyto(xp, x)
        np.copyto(gp, g)
        fp = f
        if owl:
            found = _backtracking_owlqn(fun, c1, x, xp, fp, pg, d, step, max_linesearch)
        elif linesearch == "MoreThuente":
            found = _more_thuente(fun, x, xp, fp, gp, d, step, max_linesearch)
        else:
            found = _backtracking(fun, x, xp, fp, gp, d, step,
                                  linesearch == "StrongBacktracking", max_linesearch)
        if found is None:
            np.copyto(x, xp)
            res.stop_reason = "linesearch"
            break
        f, g, step, count = found
        n_evals += count
        if owl:
            pseudo_gradient(x, g, c1, pg)
        else:
            pg = g
        res.n_iter, res.fun = k, f
        res.history.append(f)
        now = time.perf_counter()
        res.seconds.append(now - t_start)
        t_start = now
        if callback is not None:
            callback(k, x, f)
        if _nrm2(pg) / max(_nrm2(x), 1.0) <= epsilon:
            res.stop_reason = "converged"
            break
        if period > 0:
            if k >= period and abs(past[k % period] - f) < delta * abs(f):
                res.stop_reason = "delta"
                break
            past[k % period] = f
        if k >= max_iter:
            break
        # the new pair, then d = -H pg by the two-loop recursion
        s, y = S[end], Y[end]
        np.subtract(x, xp, out=s)
        np.subtract(g, gp, out=y)
        ys, yy = float(ddot(y, s)), float(ddot(y, y))
        if ys > 0 and yy > 0:
            rho[end] = 1.0 / ys
            gamma = ys / yy
            end = (end + 1) % m
            n_pairs = min(n_pairs + 1, m)
        d = np.negative(pg, out=d)
        order = [(end - 1 - i) % m for i in range(n_pairs)]      # newest first
        for j in order:
            coef[j] = rho[j] * float(ddot(S[j], d))
            d = daxpy(Y[j], d, a=-coef[j])
        if n_pairs:
            d *= gamma
        for j in reversed(order):
            beta = rho[j] * float(ddot(Y[j], d))
            d = daxpy(S[j], d, a=coef[j] - beta)
        if owl:
            constrain_direction(d, pg)
        step = 1.0
    res.n_evals = n_evals
    return res


def compact_objective(ds, table, n_states, lam2):
    """``z -> (f, g)`` of CRFsuite's objective ``-sum log p(y|x) + lam2/2
    ||z||^2`` on the compact weights ``z`` (``table``: ``feature_table``'s
    CSR arrays), one Cython pass over the sequences per call."""
    attr_ptr, feat_label, trans_id, bias_id = table

    def fun(z):
        g = np.empty_like(z)
        ll = compact_loglik_gradient(ds, z, attr_ptr, feat_label, trans_id, bias_id,
                                     n_states, g)
        g *= -1.0
        if lam2:
            g = daxpy(z, g, a=lam2)
        return -ll + 0.5 * lam2 * float(ddot(z, z)), g
    return fun


def _never(self):
    return False


class LBFGSSequenceTagger(_BaseSequenceTagger):
    """Linear-chain CRF trained by full-batch L-BFGS (OWL-QN for L1): CRFsuite's ``lbfgs``.

    Minimises the regularised conditional log-likelihood

    ``alpha * (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2) + mean over
    sequences of -log p(y | x)``

    (scikit-learn's elastic net: ``l1_ratio`` sets the mix, as in
    ``LogisticRegression``; ``penalty`` may force pure L2 or L1) by L-BFGS
    (Nocedal 1980), or by OWL-QN (Andrew and Gao, ICML 2007) when there is an
    L1 term. Each evaluation of
    the objective is one forward-backward pass over all the sequences in
    Cython (``compact_loglik_gradient``, ``_core/_crf_compact.pyx``); the two-loop
    recursion is NumPy over BLAS and the orthant-wise steps are
    ``_core/_owlqn.pyx``. The algorithm, line searches and stopping rules are
    liblbfgs's, the library CRFsuite calls, on CRFsuite's scaling of the
    objective (the sum over sequences: ``n`` times the mean above), so
    ``epsilon`` means what it means in CRFsuite.

    As in CRFsuite, only the (attribute, label) pairs and label bigrams seen
    in the training data have weights (unless ``all_possible_states`` /
    ``all_possible_transitions``); L-BFGS and the gradient pass
    (``_core/_crf_compact.pyx``) work on those only, as CRFsuite's do.

    CRFsuite's ``lbfgs`` with ``c1``, ``c2`` on ``n`` sequences is
    ``alpha = (c1 + 2 c2) / n``, ``l1_ratio = c1 / (c1 + 2 c2)``. There is no
    ``partial_fit``: L-BFGS minimises a fixed full-batch objective, and its
    curvature pairs describe that objective only, so a call on new data would
    restart from scratch.

    Parameters
    ----------
    alpha : float, default=1e-4
        Regularisation strength (the mean-scaled objective above).
    penalty : {'l2', 'l1', 'elasticnet'} or None, default=None
        ``'l2'`` forces ``l1_ratio=0``, ``'l1'`` forces ``l1_ratio=1``;
        ``'elasticnet'`` and None use ``l1_ratio``.
    l1_ratio : float, default=0.0
        The L1 share of ``alpha``, in [0, 1] (0: L2 only, L-BFGS; > 0:
        OWL-QN).
    max_iter : int, default=100
        L-BFGS iterations (CRFsuite's ``max_iterations``).
    num_memories : int, default=6
        Curvature pairs kept (CRFsuite's ``num_memories``).
    epsilon : float, default=1e-5
        Stop when ``||g|| / max(1, ||w||) <= epsilon``, ``g`` the gradient
        (pseudo-gradient with L1) of the summed objective (CRFsuite's).
    period : int, default=10
        Stop when the objective decreased by less than ``delta`` (relative)
        over the last ``period`` iterations; 0 turns the test off.
    delta : float, default=1e-5
        See ``period``.
    linesearch : {'MoreThuente', 'Backtracking', 'StrongBacktracking'}, default='MoreThuente'
        The line search without L1: More and Thuente's (strong Wolfe
        conditions), or liblbfgs's backtracking to the Wolfe or strong Wolfe
        conditions. With L1 the search is always OWL-QN's projected
        backtracking (as in CRFsuite).
    max_linesearch : int, default=20
        Objective evaluations per line search.
    all_possible_states : bool, default=False
        Give every (attribute, label) pair of the training attributes a
        weight; by default only the pairs seen in the training data have one
        (CRFsuite's ``feature.possible_states``), the others stay at zero.
    all_possible_transitions : bool, default=False
        Give every label bigram a weight; by default only the bigrams seen
        in training (CRFsuite's ``feature.possible_transitions``).
    fit_intercept : bool, default=True
        Add a per-label bias to every token's scores (penalised like the
        other weights; CRFsuite has none).
    verbose : int, default=0
        Print the objective after each iteration.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        The labels, sorted.
    state_features_ : dict
        ``{(attribute, label): weight}`` (non-zero weights), as sklearn-crfsuite.
    transition_features_ : dict
        ``{(label_from, label_to): weight}``, as sklearn-crfsuite.
    attributes_ : list
        Attribute names by column.
    coef_ : ndarray of shape (n_labels, n_attributes)
        The state weights.
    intercept_ : ndarray of shape (n_labels,)
        The per-label bias (zero unless ``fit_intercept``).
    vocabulary_ : dict
        Attribute name -> column (feature-dict input only).
    n_features_in_ : int
        Number of features of numeric input (not set for feature dicts).
    n_iter_ : int
        L-BFGS iterations made.
    n_evals_ : int
        Objective evaluations (forward-backward passes) made.
    objective_ : float
        The final objective (the mean-scaled one above).
    stop_reason_ : str
        ``'converged'`` (``epsilon``), ``'delta'`` (``period`` / ``delta``),
        ``'max_iter'``, or ``'linesearch'`` (no acceptable step: the last
        accepted point is kept, as CRFsuite does).
    loss_ : list of float
        The objective after every iteration in CRFsuite's scaling
        (``n_sequences * objective``: the "Loss" of CRFsuite's training log).
    pass_seconds_ : list of float
        Wall time of every iteration.

    See Also
    --------
    SGDSequenceTagger : SGD on the same objective (L2).
    AveragedPerceptronSequenceTagger : CRFsuite's ``ap``.

    References
    ----------
    J. Nocedal, "Updating quasi-Newton matrices with limited storage",
    Mathematics of Computation 35 (1980). G. Andrew and J. Gao, "Scalable
    training of L1-regularized log-linear models", ICML 2007.

    Examples
    --------
    >>> from sklearn_secondorder import LBFGSSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> LBFGSSequenceTagger().fit(X, y).predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "penalty": [StrOptions({"l2", "l1", "elasticnet"}), None],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "num_memories": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "period": [Interval(Integral, 0, None, closed="left")],
        "delta": [Interval(Real, 0, None, closed="left")],
        "linesearch": [StrOptions({"MoreThuente", "Backtracking", "StrongBacktracking"})],
        "max_linesearch": [Interval(Integral, 1, None, closed="left")],
        "all_possible_states": ["boolean"],
        "all_possible_transitions": ["boolean"],
        "fit_intercept": ["boolean"],
        "verbose": ["verbose"],
    }

    def __init__(self, *, alpha=1e-4, penalty=None, l1_ratio=0.0, max_iter=100,
                 num_memories=6, epsilon=1e-5, period=10, delta=1e-5,
                 linesearch="MoreThuente", max_linesearch=20, all_possible_states=False,
                 all_possible_transitions=False, fit_intercept=True, verbose=0):
        self.alpha = alpha
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.max_iter = max_iter
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.fit_intercept = fit_intercept
        self.verbose = verbose

    @available_if(_never)
    def partial_fit(self, X, y, classes=None):
        """Not available: L-BFGS minimises a fixed full-batch objective.

        Parameters
        ----------
        X : list of sequences
            Unused.
        y : list of label lists
            Unused.
        classes : array-like, default=None
            Unused.

        Returns
        -------
        self : object
            Never returned.
        """
        raise AttributeError("partial_fit")   # pragma: no cover - hidden by available_if

    def _effective_l1_ratio(self):
        return {"l2": 0.0, "l1": 1.0}.get(self.penalty, self.l1_ratio)

    def _fit_batch(self, batch, n_epochs, first):
        label_idx = np.searchsorted(self.classes_, batch.labels).astype(np.int32)
        # no randomness: the weights start at zero, as CRFsuite's
        self._new_state(batch.n_features, np.random.RandomState(0))
        crf = self._state.crf
        ds = batch.sequence_data(crf.n_attributes, label_idx)
        exists = observed_weights(batch, label_idx, crf.n_attributes, crf.n_states,
                                  all_possible_states=self.all_possible_states,
                                  all_possible_transitions=self.all_possible_transitions,
                                  fit_intercept=self.fit_intercept)
        n = batch.n_sequences
        l1_ratio = self._effective_l1_ratio()
        c1 = n * self.alpha * l1_ratio
        lam2 = n * self.alpha * (1.0 - l1_ratio)

        def report(k, x, f):
            if self.verbose:
                print(f"-- iteration {k}: objective {f / n:.8g}")

        # L-BFGS works on the existing weights only, one entry each (CRFsuite's
        # layout): its vectors and the gradient pass's work scale with them
        idx, *table = feature_table(exists.view(np.uint8), crf.n_attributes, crf.n_states)
        fun = compact_objective(ds, table, crf.n_states, lam2)
        res = minimize_lbfgs(fun, np.zeros(idx.size), c1=c1, num_memories=self.num_memories,
                             epsilon=self.epsilon, period=self.period, delta=self.delta,
                             max_iter=n_epochs, linesearch=self.linesearch,
                             max_linesearch=self.max_linesearch, callback=report)
        if not np.all(np.isfinite(res.x)) or not np.isfinite(res.fun):
            raise diverged_error(type(self).__name__, res.n_iter + 1,
                                 remedy="check the feature values")
        crf.coef[:] = 0.0
        crf.coef[idx] = res.x
        self._state.pass_seconds.extend(res.seconds)
        self.n_iter_ = res.n_iter
        self.n_evals_ = res.n_evals
        self.objective_ = res.fun / n
        self.loss_ = list(res.history)
        self.stop_reason_ = res.stop_reason
        self._model = crf.coef.copy()
        self._check_weight_scale(batch.n_tokens / batch.n_sequences)
        return self
