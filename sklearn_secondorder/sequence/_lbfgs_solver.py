"""``minimize_lbfgs``: L-BFGS, and OWL-QN with an L1 term, as liblbfgs runs them.

The two-loop recursion (Nocedal 1980; Nocedal and Wright, Algorithm 7.4) in
NumPy over BLAS, with OWL-QN's orthant-wise steps (Andrew and Gao, ICML 2007;
``_core/_owlqn.pyx``) when there is an L1 term, and the stopping rules and
line searches (``_line_search``) of liblbfgs, the library CRFsuite's
``lbfgs`` trainer calls. The objective is any ``x -> (f, g)``;
``LBFGSSequenceTagger`` (``_lbfgs``) gives it the CRF's.
"""
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.blas import daxpy, ddot
from threadpoolctl import threadpool_limits

from .._core._owlqn import constrain_direction, l1_norm, pseudo_gradient
from ._line_search import backtracking, more_thuente, owlqn_backtracking


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


class _CurvatureMemory:
    """The ``m`` newest pairs ``(s, y)`` of L-BFGS in a ring buffer, and the
    two-loop recursion over them (Nocedal and Wright, Algorithm 7.4)."""

    def __init__(self, m, n):
        self.S, self.Y = np.empty((m, n)), np.empty((m, n))
        self.rho, self.coef = np.zeros(m), np.zeros(m)
        self.m, self.n_pairs, self.end = m, 0, 0
        self.gamma = None

    def push(self, x, xp, g, gp):
        """Store ``s = x - xp``, ``y = g - gp``, unless ``y.s <= 0`` (possible
        without L2); ``gamma = y.s / y.y`` of the newest pair stored scales
        the initial Hessian."""
        end = self.end
        s, y = self.S[end], self.Y[end]
        np.subtract(x, xp, out=s)
        np.subtract(g, gp, out=y)
        ys, yy = float(ddot(y, s)), float(ddot(y, y))
        if ys > 0 and yy > 0:
            self.rho[end] = 1.0 / ys
            self.gamma = ys / yy
            self.end = (end + 1) % self.m
            self.n_pairs = min(self.n_pairs + 1, self.m)

    def direction(self, pg, d):
        """``-H pg`` by the two-loop recursion, written into ``d`` and returned."""
        S, Y, rho, coef = self.S, self.Y, self.rho, self.coef
        d = np.negative(pg, out=d)
        order = [(self.end - 1 - i) % self.m for i in range(self.n_pairs)]  # newest first
        for j in order:
            coef[j] = rho[j] * float(ddot(S[j], d))
            d = daxpy(Y[j], d, a=-coef[j])
        if self.n_pairs:
            d *= self.gamma
        for j in reversed(order):
            beta = rho[j] * float(ddot(Y[j], d))
            d = daxpy(S[j], d, a=coef[j] - beta)
        return d


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


def _line_search(fun, c1, x, xp, fp, gp, pg, d, step, linesearch, max_linesearch):
    """One line search from ``xp`` along ``d`` (OWL-QN's projected
    backtracking with ``c1 > 0``, else ``linesearch``): ``(f, g, step,
    evaluations)``, or None when it fails; ``x`` holds the new point."""
    if c1 > 0:
        return owlqn_backtracking(fun, c1, x, xp, fp, pg, d, step, max_linesearch)
    if linesearch == "MoreThuente":
        return more_thuente(fun, x, xp, fp, gp, d, step, max_linesearch)
    return backtracking(fun, x, xp, fp, gp, d, step, linesearch == "StrongBacktracking",
                        max_linesearch)


def _stop_reason(x, pg, f, k, past, epsilon, period, delta):
    """liblbfgs's stopping rules after iteration ``k``: ``'converged'``
    (``||pg|| / max(1, ||x||) <= epsilon``), ``'delta'`` (the objective
    ``period`` iterations ago within ``delta`` of ``f``, relative), or None;
    ``past`` (the last ``period`` objectives) takes ``f``."""
    if _nrm2(pg) / max(_nrm2(x), 1.0) <= epsilon:
        return "converged"
    if period > 0:
        if k >= period and abs(past[k % period] - f) < delta * abs(f):
            return "delta"
        past[k % period] = f
    return None


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
    memory = _CurvatureMemory(m, n)
    xp, gp = np.empty(n), np.empty(n)
    t_start = time.perf_counter()
    for k in range(1, max_iter + 1):
        np.copyto(xp, x)
        np.copyto(gp, g)
        fp = f
        found = _line_search(fun, c1, x, xp, fp, gp, pg, d, step, linesearch, max_linesearch)
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
        stop = _stop_reason(x, pg, f, k, past, epsilon, period, delta)
        if stop is not None:
            res.stop_reason = stop
            break
        if k >= max_iter:
            break
        # the new pair, then d = -H pg by the two-loop recursion
        memory.push(x, xp, g, gp)
        d = memory.direction(pg, d)
        if owl:
            constrain_direction(d, pg)
        step = 1.0
    res.n_evals = n_evals
    return res
