"""The NumPy reference implementations the tests check the kernels against.

One home for every oracle: each is a direct, dense, step-by-step NumPy (or
brute-force) transcription of the algorithm its kernel implements lazily or
in place, written independently of the kernel. The test modules import them
from here.
"""
import itertools

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from sklearn_secondorder._core._crf_infer import (
    loglik_gradient,
)
from sklearn_secondorder._core._crf_sgd import (
    is_feedback_pass,
)
from sklearn_secondorder._core._dataset import SequenceData
from sklearn_secondorder._core._losses import (
    py_softmax_loss,
)
from sklearn_secondorder._core._sbm_bound import bound
from sklearn_secondorder._core._sbm_lowrank_bound import (
    merge_isotropic_py,
    merge_py,
)
from sklearn_secondorder._core._weights import ScaledWeights


# ---- used by test_contract.py --------------------------------------------------------
def _numpy_constant_sgd(X, y, w, b, eta, alpha):
    """Plain SGD with a constant step on the log loss, rows in order; the
    shrink clipped at 0 (``SGDClassifier``'s ``w.scale(max(0, 1 - eta
    alpha))``, ``sklearn/linear_model/_sgd_fast.pyx.tp``)."""
    w, b = w.copy(), float(b)
    for x, t in zip(X, np.where(y == 1, 1.0, -1.0)):
        g = -t / (1.0 + np.exp(t * (x @ w + b)))
        w = max(0.0, 1 - eta * alpha) * w - eta * g * x
        b -= eta * g
    return w, b


# ---- used by test_core.py ------------------------------------------------------------
def numpy_linear_sgd(X, y, sw, *, K, loss, alpha, eta0, t0, n_epochs, fit_intercept,
                     constant=False, average=False):
    """Dense NumPy re-implementation of the plain SGD epochs (no shuffling)."""
    X = X.toarray() if sp.issparse(X) else X
    W, b = np.zeros((X.shape[1], K)), np.zeros(K)
    Wsum, bsum, t, n_it = np.zeros_like(W), np.zeros(K), 0, 0
    for _ in range(n_epochs):
        for i in range(X.shape[0]):
            if sw[i] == 0:
                continue
            eta = eta0 if constant else 1.0 / (alpha * (t + t0))
            s = X[i] @ W + b
            if K == 1:
                g = np.array([loss.py_dloss(s[0], y[i])])
            else:
                g = py_softmax_loss(s, int(y[i]))[1]
            g = -eta * sw[i] * g
            W *= max(0.0, 1 - eta * alpha)
            W += np.outer(X[i], g)
            if fit_intercept:
                b += g
            t += 1
            if average:
                Wsum += W
                bsum += b
                n_it += 1
    if average:
        return Wsum / n_it, bsum / n_it, t
    return W, b, t


# ---- used by test_crf.py -------------------------------------------------------------
def brute_force(em, tr, n_latent=1, labels=None):
    """log Z, node/edge marginals and best path by enumerating all paths."""
    T, H = em.shape
    paths = np.array(list(itertools.product(range(H), repeat=T)))
    scores = em[np.arange(T), paths].sum(axis=1)
    scores += tr[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    if labels is not None:
        keep = np.all(paths // n_latent == np.asarray(labels), axis=1)
        paths, scores = paths[keep], scores[keep]
    log_z = logsumexp(scores)
    p = np.exp(scores - log_z)
    marg = np.zeros((T, H))
    edge = np.zeros((H, H))
    for path, pr in zip(paths, p):
        marg[np.arange(T), path] += pr
        np.add.at(edge, (path[:-1], path[1:]), pr)
    return log_z, marg, edge, paths[scores.argmax()], scores.max()


def to_data(X, offsets, labels=None):
    X = sp.csr_matrix(X)
    return SequenceData(X.data.astype(np.float64), X.indices.astype(np.int32),
                        X.indptr.astype(np.int64), offsets, labels, X.shape[1])


class RoundStarts:
    """Where the rounds of a pass shared by threads start (the kernels'
    rule): a round holds at most ``size`` rows (sequences) and ends at the
    row of an event too (``t`` a multiple of ``b``); a row is scored at the
    weights of its round's start. ``size=None``: every row starts one (the
    one-thread algorithm, each row at the weights before it).

    Call ``new_pass(t)`` at a pass's start, then ``starts(t)`` before each
    row (rows of weight 0 count towards ``size`` but not towards ``t``).
    """

    def __init__(self, size, b):
        self.size, self.b = size, b

    def new_pass(self, t):
        self.t_round, self.in_round = t, 0

    def starts(self, t):
        new = (self.size is None or self.in_round == 0 or self.in_round == self.size
               or (t != self.t_round and t % self.b == 0))
        if new:
            self.t_round, self.in_round = t, 0
        self.in_round += 1
        return new


def numpy_crf_sgd(X, offsets, labels, A, L, *, eta0, power, alpha, n_epochs,
                  average, feedback, fit_intercept=True, round_seqs=None, round_starts=None):
    """Reference SGD / averaged SGD / ASF, dense, with explicit iterates.

    ``round_seqs``: each sequence's gradient at the weights of the start of
    its round of that many sequences (the kernel's pass shared by threads);
    ``round_starts``: the same with the rounds starting at these sequences.
    """
    if round_seqs is not None:
        round_starts = range(0, len(offsets) - 1, round_seqs)
    if round_starts is not None:
        round_starts = set(round_starts)
    n_seq = len(offsets) - 1
    w = np.zeros((A + L + 1) * L)
    iterates = []
    feedbacks = []
    t = 0
    for epoch in range(1, n_epochs + 1):
        for s in range(n_seq):
            if round_starts is None or s in round_starts:
                at = w
            eta = eta0 / (1 + alpha * eta0 * t) ** power
            sub = to_data(X[offsets[s]:offsets[s + 1]], np.array([0, offsets[s + 1] - offsets[s]]),
                          labels[offsets[s]:offsets[s + 1]])
            _, g = loglik_gradient(sub, ScaledWeights(at.copy(), L), fit_intercept=fit_intercept)
            w = (1 - eta * alpha) * w + eta * g
            t += 1
            iterates.append(w.copy())
        if feedback and is_feedback_pass(epoch):
            w = np.mean(iterates, axis=0)  # Eq. 2: all iterates since the start
            feedbacks.append(epoch)
    avg = np.mean(iterates, axis=0) if iterates else w
    return w, avg, feedbacks


def numpy_crf_psa(X, offsets, labels, A, L, *, eta0, lam, b, a, be, kappa, n_epochs,
                  fit_intercept=True, round_seqs=None):
    """Dense PSA: every weight shrinks at every update; snapshots every b.

    ``round_seqs``: the sequences go by in rounds of at most that many, a
    round ending at the sequence of an event too, and each sequence's
    gradient is taken at the weights of its round's start (the kernel's pass
    shared by threads); None: at the weights before it.
    """
    m = kappa * (a + be) / (a - be)
    n = 2 * kappa * (1 - a) / (a - be)
    w = np.zeros((A + L + 1) * L)
    eta = np.full_like(w, eta0)
    snaps = [w.copy()]
    t = 0
    rounds = RoundStarts(round_seqs, b)
    for _ in range(n_epochs):
        rounds.new_pass(t)
        for s in range(len(offsets) - 1):
            if rounds.starts(t):
                at = w
            sub = to_data(X[offsets[s]:offsets[s + 1]],
                          np.array([0, offsets[s + 1] - offsets[s]]),
                          labels[offsets[s]:offsets[s + 1]])
            _, g = loglik_gradient(sub, ScaledWeights(at.copy(), L), fit_intercept=fit_intercept)
            w = (1 - eta * lam) * w + eta * g
            t += 1
            if t % b == 0:
                snaps.append(w.copy())
            if t % (2 * b) == 0:
                w0, w1, w2 = snaps[-3:]
                num, den = w2 - w1, w1 - w0
                with np.errstate(divide="ignore", invalid="ignore"):
                    g_ratio = np.where(den != 0, num / den, np.sign(num) * np.inf)
                u = np.sign(g_ratio) * np.minimum(np.abs(g_ratio), kappa)
                v = (m + u) / (m + kappa + n)
                still = (den == 0) & (num == 0)           # 0/0: eta unchanged
                eta = np.where(still, eta, eta * v)
    return w, eta, t


# ---- used by test_penalty.py ---------------------------------------------------------
def apply_penalty(w, u, q, mask):
    """Tsuruoka et al. (2009), Fig. 2 ApplyPenalty on every weight of ``mask``,
    vectorised: ``w > 0`` moves down by ``u + q``, ``w < 0`` up by ``u - q``,
    clipped at 0; ``q`` accumulates the change."""
    z = w.copy()
    pos, neg = mask & (w > 0), mask & (w < 0)
    w[pos] = np.maximum(0.0, w[pos] - (u[pos] + q[pos]))
    w[neg] = np.minimum(0.0, w[neg] + (u[neg] - q[neg]))
    q += w - z


def _gradient(xrow, th, d, K, y, loss, fit_intercept):
    s = xrow @ th[:d * K].reshape(d, K) + (th[d * K:] if fit_intercept else 0.0)
    return (np.array([loss.py_dloss(s[0], y)]) if K == 1
            else py_softmax_loss(s, int(y))[1])


def numpy_sgd_l1(X, y, sw, *, K, loss, alpha, l1_ratio, eta0, t0, learning_rate, n_epochs,
                 fit_intercept=True):
    """Dense cumulative-penalty SGD: every weight shrinks and is penalised at
    every step. The total ``u`` and the applied ``q`` shrink with the weights
    (the penalty owed is in the weights' units)."""
    X = X.toarray()
    d = X.shape[1]
    w, b = np.zeros(d * K), np.zeros(K)
    u, q = np.zeros(d * K), np.zeros(d * K)
    everywhere = np.ones(d * K, bool)
    t = 0
    for _ in range(n_epochs):
        for i in range(X.shape[0]):
            if sw[i] == 0:
                continue
            eta = eta0 if learning_rate == "constant" else 1.0 / (alpha * (t + t0))
            g = -eta * sw[i] * np.clip(_gradient(X[i], np.r_[w, b], d, K, y[i], loss,
                                                 fit_intercept), -1e12, 1e12)
            c = max(0.0, 1.0 - eta * alpha * (1.0 - l1_ratio))
            w, u, q = c * w, c * u, c * q
            w += np.outer(X[i], g).ravel()
            if fit_intercept:
                b += g
            u += eta * alpha * l1_ratio
            apply_penalty(w, u, q, everywhere)
            t += 1
    return w, b, t


def numpy_psa_l1(X, y, sw, *, K, loss, lam, l1, eta0, b, pa=0.9999, pb=0.99, kappa=0.9,
                 n_epochs=1, fit_intercept=True, round_rows=None):
    """Dense Algorithm 1 (Hsu et al.) with the cumulative L1 penalty on each
    weight's own steps: ``u_p += eta_p C`` at every step, every weight clipped
    at every step, the intercept unpenalised. ``round_rows``: as
    ``numpy_linear_psa``'s."""
    X = X.toarray()
    d = X.shape[1]
    th = np.zeros((d + 1) * K)
    eta = np.full_like(th, eta0)
    u, q = np.zeros_like(th), np.zeros_like(th)
    m = kappa * (pa + pb) / (pa - pb)
    n = 2 * kappa * (1 - pa) / (pa - pb)
    reg = np.ones(th.size, bool)
    reg[d * K:] = False
    lam_v = np.where(reg, lam, 0.0)
    snaps, t = [th.copy()], 0
    rounds = RoundStarts(round_rows, b)
    for _ in range(n_epochs):
        rounds.new_pass(t)
        for i in range(X.shape[0]):
            if rounds.starts(t):
                at = th
            if sw[i] == 0:
                continue
            g = _gradient(X[i], at, d, K, y[i], loss, fit_intercept)
            grad = np.zeros_like(th)
            grad[:d * K] = np.outer(X[i], g).ravel() * sw[i]
            if fit_intercept:
                grad[d * K:] = g * sw[i]
            c = np.maximum(0.0, 1 - eta * lam_v)
            th = c * th - eta * grad
            u = np.where(reg, c * u + eta * l1, 0.0)
            q = c * q
            apply_penalty(th, u, q, reg)
            t += 1
            if t % b == 0:
                snaps.append(th.copy())
            if t % (2 * b) == 0:
                num, den = snaps[-1] - snaps[-2], snaps[-2] - snaps[-3]
                with np.errstate(divide="ignore", invalid="ignore"):
                    gamma = np.where(den != 0, num / den, np.sign(num) * np.inf)
                uu = np.clip(gamma, -kappa, kappa)
                eta = eta * np.where((den == 0) & (num == 0), 1.0, (m + uu) / (m + kappa + n))
    return th, eta, t


def _data(X, offsets, labels):
    X = sp.csr_matrix(X)
    return SequenceData(X.data.astype(np.float64), X.indices.astype(np.int32),
                        X.indptr.astype(np.int64), offsets, labels, X.shape[1])


def _seq_gradient(X, offsets, labels, s, w, L, fit_intercept):
    lo, hi = offsets[s], offsets[s + 1]
    sub = _data(X[lo:hi], np.array([0, hi - lo]), labels[lo:hi])
    return loglik_gradient(sub, ScaledWeights(w.copy(), L), fit_intercept=fit_intercept)[1]


def numpy_crf_sgd_l1(X, offsets, labels, A, L, *, eta0, power, alpha, l1_ratio, n_epochs):
    """Dense CRF SGD with the cumulative L1 penalty on every weight (bias and
    transitions included) at every step."""
    w = np.zeros((A + L + 1) * L)
    u, q = np.zeros_like(w), np.zeros_like(w)
    t = 0
    for _ in range(n_epochs):
        for s in range(len(offsets) - 1):
            eta = eta0 / (1 + alpha * eta0 * t) ** power
            g = _seq_gradient(X, offsets, labels, s, w, L, True)
            c = 1 - eta * alpha * (1 - l1_ratio)
            w, u, q = c * w + eta * g, c * u + eta * alpha * l1_ratio, c * q
            apply_penalty(w, u, q, np.ones(w.size, bool))
            t += 1
    return w


def numpy_crf_psa_l1(X, offsets, labels, A, L, *, eta0, lam, l1, b, n_epochs, a=0.9999,
                     be=0.99, kappa=0.9, round_seqs=None):
    """Dense PSA with Tsuruoka's cumulative L1 penalty (``round_seqs``: as
    ``numpy_crf_psa``'s)."""
    m = kappa * (a + be) / (a - be)
    n = 2 * kappa * (1 - a) / (a - be)
    w = np.zeros((A + L + 1) * L)
    eta = np.full_like(w, eta0)
    u, q = np.zeros_like(w), np.zeros_like(w)
    snaps, t = [w.copy()], 0
    rounds = RoundStarts(round_seqs, b)
    for _ in range(n_epochs):
        rounds.new_pass(t)
        for s in range(len(offsets) - 1):
            if rounds.starts(t):
                at = w
            g = _seq_gradient(X, offsets, labels, s, at, L, True)
            c = np.maximum(0.0, 1 - eta * lam)
            w, u, q = c * w + eta * g, c * u + eta * l1, c * q
            apply_penalty(w, u, q, np.ones(w.size, bool))
            t += 1
            if t % b == 0:
                snaps.append(w.copy())
            if t % (2 * b) == 0:
                num, den = snaps[-1] - snaps[-2], snaps[-2] - snaps[-3]
                with np.errstate(divide="ignore", invalid="ignore"):
                    gr = np.where(den != 0, num / den, np.sign(num) * np.inf)
                uu = np.sign(gr) * np.minimum(np.abs(gr), kappa)
                eta = np.where((den == 0) & (num == 0), eta, eta * (m + uu) / (m + kappa + n))
    return w, eta, t


# ---- used by test_psa.py -------------------------------------------------------------
def numpy_linear_psa(X, y, sw, *, K, loss, alpha, eta0, b, pa=0.9999, pb=0.99, kappa=0.9,
                     n_epochs=1, fit_intercept=True, round_rows=None, scores=None,
                     eta_init=None, bound_steps=False):
    """Dense Algorithm 1 with L2: every coordinate updated at every step.

    ``round_rows``: the rows go by in rounds of at most that many, a round
    ending at the row of an event too, and every row of a round is scored
    at the weights of the round's start (the kernel's pass shared by
    threads); None: each row at the weights before it. ``scores``: an
    ``(n, K)`` array that receives each row's scores of the last pass.
    ``eta_init``: the initial step of each weight (the intercept's last),
    else ``eta0`` for all. ``bound_steps`` (regression, ``K = 1``): a step
    moves the row's prediction at most to its target.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    d = X.shape[1]
    th = np.zeros((d + 1) * K)
    eta = (np.full_like(th, eta0) if eta_init is None
           else np.array(eta_init, dtype=np.float32).astype(np.float64))
    m = kappa * (pa + pb) / (pa - pb)                     # Eq. (10)
    n = 2 * kappa * (1 - pa) / (pa - pb)
    lam = np.full_like(th, alpha)
    lam[d * K:] = 0.0                                     # intercept not penalised
    snaps, t, factors = [th.copy()], 0, []
    rounds = RoundStarts(round_rows, b)
    for _ in range(n_epochs):
        rounds.new_pass(t)
        for i in range(X.shape[0]):
            if rounds.starts(t):
                w = th
            if sw[i] == 0:
                continue
            s = X[i] @ w[:d * K].reshape(d, K) + (w[d * K:] if fit_intercept else 0.0)
            if scores is not None:
                scores[i] = s
            g = (np.array([loss.py_dloss(s[0], y[i])]) if K == 1
                 else py_softmax_loss(s, int(y[i]))[1])
            if bound_steps:
                # the move of the prediction: h sw g, at most |s - y|
                h = (eta[:d] @ X[i] ** 2 + (eta[d] if fit_intercept else 0.0)) * sw[i]
                if h * abs(g[0]) > abs(s[0] - y[i]):
                    g = np.array([(s[0] - y[i]) / h])
            grad = np.zeros_like(th)
            grad[:d * K] = np.outer(X[i], g).ravel() * sw[i]
            if fit_intercept:
                grad[d * K:] = g * sw[i]
            th = np.maximum(0.0, 1 - eta * lam) * th - eta * grad   # line 5
            t += 1
            if t % b == 0:
                snaps.append(th.copy())
            if t % (2 * b) == 0:                                    # lines 6-10
                num, den = snaps[-1] - snaps[-2], snaps[-2] - snaps[-3]
                with np.errstate(divide="ignore", invalid="ignore"):
                    gamma = np.where(den != 0, num / den, np.sign(num) * np.inf)
                u = np.clip(gamma, -kappa, kappa)
                f = np.where((den == 0) & (num == 0), 1.0, (m + u) / (m + kappa + n))
                factors.append(f[(den != 0) | (num != 0)])
                eta = eta * f
    return th, eta, t, factors


# ---- used by test_sbm.py -------------------------------------------------------------
def _beta_kappa(r):
    b = 0.25 if abs(r) < 1e-8 else np.tanh(r / 2) / (2 * r)
    return b, 1 / (1 + np.exp(-r))


def _dense(X):
    return np.asarray(X.todense() if sp.issparse(X) else X, dtype=float)


def _table(K):
    return np.array([[0.0], [1.0]]) if K == 1 else np.eye(K)


def _label(yj, K):
    return (1 if yj > 0 else 0) if K == 1 else int(yj)


def ref_full(X, yk, sw, K, alpha, eta, fit_intercept, theta0, orders, batch_size=1):
    """Algorithm 2 as printed, with the example's gradient term added once."""
    X = _dense(X)
    n, d = X.shape
    Xt = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    P = Xt.shape[1] * K
    F = _table(K)
    reg = np.zeros(P)
    reg[:d * K] = 1
    M, mu, phi, theta = np.eye(P) / (n * alpha), np.zeros(P), np.zeros(P), theta0.copy()
    for order in orders:
        cnt = 0
        for j in order:
            if sw[j] == 0:
                continue
            x = Xt[j]
            s = theta.reshape(-1, K).T @ x
            la = np.array([0.0, s[0]]) if K == 1 else s
            g, logz = np.zeros(P), -np.inf
            for yy in range(len(F)):
                f = np.kron(x, F[yy])
                ell = f - g
                b, kap = _beta_kappa(la[yy] - logz) if np.isfinite(logz) else (0.0, 1.0)
                q = np.sqrt(sw[j] * b) * ell
                Mq = M @ q
                N = np.outer(Mq, Mq) / (1 + q @ Mq)
                xi = sw[j] * kap * ell
                M = M - N
                phi = phi + M @ xi - N @ mu
                g, mu = g + kap * ell, mu + xi
                logz = np.logaddexp(logz, la[yy])
            xi0 = -sw[j] * np.kron(x, F[_label(yk[j], K)]) + alpha * theta * reg
            phi, mu = phi + M @ xi0, mu + xi0
            cnt += 1
            if cnt % batch_size == 0:
                theta = theta - eta * phi
        if cnt % batch_size:
            theta = theta - eta * phi
    return theta, M, mu, phi


def ref_surrogate(X, yk, sw, K, alpha, eta, fit_intercept, theta0, orders, batch_size=1):
    """Incremental MM with the bounds of Algorithm 1: explicit Sigma, its inverse, and
    the minimiser of the sum of the bounds; lam added to Sigma as the visits grow."""
    X = _dense(X)
    n, d = X.shape
    Xt = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    P = Xt.shape[1] * K
    F = _table(K)
    icpt = np.arange(P) >= d * K
    m = np.count_nonzero(sw)         # the rows that take part (weight 0: left out)
    # lam = n_t alpha: n_t starts at min(128, m) and doubles whenever the
    # visits t reach it (the estimator's schedule, every visit counted)
    n_t = min(128, m)
    lam_tot = n_t * alpha
    Sig, b, theta, t = lam_tot * np.eye(P), np.zeros(P), theta0.copy(), 0
    for order in orders:
        cnt = 0
        for j in order:
            if sw[j] == 0:
                continue
            while n_t <= t:
                n_t *= 2
                Sig, lam_tot = Sig + (n_t * alpha - lam_tot) * np.eye(P), n_t * alpha
            t += 1
            x = Xt[j]
            s = theta.reshape(-1, K).T @ x
            la = np.array([0.0, s[0]]) if K == 1 else s
            _, g, SigF = bound(F, la)
            Sig = Sig + sw[j] * np.kron(np.outer(x, x), SigF)
            b = b + np.kron(x, sw[j] * (g - F[_label(yk[j], K)]) - sw[j] * SigF @ s)
            cnt += 1
            if cnt % batch_size == 0 or cnt == m:
                theta_hat = -np.linalg.solve(Sig, b - lam_tot * theta * icpt)
                theta = theta - eta * (theta - theta_hat)
    return theta


def _factors(la, F, swj):
    """Rank-one factors sqrt(s beta_y) u_y of S_j, and g, from a plain loop."""
    U, g, lz = [], np.zeros(F.shape[1]), -np.inf
    for yy in range(len(F)):
        u = F[yy] - g
        if np.isfinite(lz):
            b, kap = _beta_kappa(la[yy] - lz)
            U.append(np.sqrt(swj * b) * u)
        else:
            kap = 1.0
        g, lz = g + kap * u, np.logaddexp(lz, la[yy])
    return U, g


def ref_lowrank(X, yk, sw, K, alpha, eta, fit_intercept, theta0, orders, head, k,
                batch_size=1, lazy_head=False, lam=None):
    """Low-rank pass (head/tail split) with every coordinate stepped at every example,
    the head's diagonal per coordinate or (``lazy_head``) a multiple of I; ``lam``: the
    initial curvature, ``n alpha`` by default."""
    X = _dense(X)
    n, d = X.shape
    Xt = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    feats = list(head) + ([d] if fit_intercept else [])
    hc = (np.asarray(feats, dtype=int)[:, None] * K + np.arange(K)).ravel()
    P, H = Xt.shape[1] * K, hc.size
    lam = n * alpha if lam is None else lam
    ishead = np.zeros(d + 1, bool)
    ishead[feats] = True
    tail = np.array([p for p in range(P) if not ishead[p // K]], dtype=int)
    reg = np.zeros(P)
    reg[:d * K] = 1
    F = _table(K)
    theta, mu, D = theta0.copy(), np.zeros(P), np.full(P, lam)
    Dh = lam if lazy_head else np.full(H, lam)
    merge_head = merge_isotropic_py if lazy_head else merge_py
    k = min(k, H)
    V, S = np.eye(k, H), np.zeros((k, k))
    for order in orders:
        rows = [j for j in order if sw[j] != 0]
        for step, j in enumerate(rows):
            x = Xt[j]
            s = theta.reshape(-1, K).T @ x
            la = np.array([0.0, s[0]]) if K == 1 else s
            U, c = _factors(la, F, sw[j])
            hf = [f for f in np.flatnonzero(x) if ishead[f]]
            tf = [f for f in np.flatnonzero(x) if not ishead[f]]
            if not tf:
                fh, ft = 1.0, 0.0
            elif not hf:
                fh, ft = 0.0, 1.0
            else:
                gam = np.sqrt(sum(x[tf] ** 2) / sum(x[hf] ** 2))
                fh, ft = 1 + gam, 1 + 1 / gam
            xh = np.zeros(Xt.shape[1])
            xh[hf] = x[hf]
            for u in U:
                if hf:
                    V, S, Dh = merge_head(V, S, Dh, np.sqrt(fh) * np.kron(xh, u)[hc])
            if tf and U:
                rowabs = np.abs(sum(np.outer(u, u) for u in U)).sum(1)
                for f in tf:
                    D[f * K:(f + 1) * K] += ft * rowabs * np.abs(x[tf]).sum() * abs(x[f])
            mu += np.kron(x, sw[j] * (c - F[_label(yk[j], K)])) + alpha * theta * reg
            if (step + 1) % batch_size == 0 or step == len(rows) - 1:
                phi = np.zeros(P)
                phi[hc] = np.linalg.solve(V.T @ S @ V + Dh * np.eye(H), mu[hc])
                phi[tail] = mu[tail] / D[tail]
                theta = theta - eta * phi
        V, S = _reorthonormalize(V, S)        # the kernel's exact change of basis per pass
    D[hc] = Dh
    return theta, mu, D, V.T @ S @ V


def _reorthonormalize(V, S):
    """Modified Gram-Schmidt V = L Q and S <- L^T S L (V^T S V unchanged)."""
    V, k = V.copy(), V.shape[0]
    L = np.zeros((k, k))
    for i in range(k):
        for j in range(i):
            L[i, j] = V[j] @ V[i]
            V[i] -= L[i, j] * V[j]
        L[i, i] = np.linalg.norm(V[i])
        if L[i, i] > 0:
            V[i] /= L[i, i]
    S = L.T @ (S @ L)
    return V, 0.5 * (S + S.T)


def ref_batched(X, yk, sw, K, alpha, eta, fit_intercept, theta0, orders, B):
    """The batched update in NumPy: the bounds of a batch at the batch's weights,
    ``Sigma += sum_j s_j S_j (x) xt xt^T`` at once, ``M = Sigma^-1``, ``mu +=`` the
    batch's gradients and ``n_b alpha theta``, then ``theta -= eta M mu``; batches
    restart with each pass (rows of weight 0 take no part)."""
    X = _dense(X)
    n, d = X.shape
    Xt = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    P = Xt.shape[1] * K
    F = _table(K)
    reg = (np.arange(P) < d * K).astype(float)
    Sig, mu, theta = n * alpha * np.eye(P), np.zeros(P), theta0.copy()
    for order in orders:
        rows = [j for j in order if sw[j] != 0]
        for start in range(0, len(rows), B):
            batch = rows[start:start + B]
            for j in batch:
                x = Xt[j]
                s = theta.reshape(-1, K).T @ x
                _, g, SigF = bound(F, np.array([0.0, s[0]]) if K == 1 else s)
                Sig = Sig + sw[j] * np.kron(np.outer(x, x), SigF)
                mu = mu + sw[j] * np.kron(x, g - F[_label(yk[j], K)])
            mu = mu + len(batch) * alpha * theta * reg
            M = np.linalg.inv(Sig)
            theta = theta - eta * M @ mu
    return theta, M, mu, M @ mu


# ---- used by test_trainers.py --------------------------------------------------------
def features(x, path, H, fit_intercept):
    """``F(x, path)`` in the flat layout: attributes x labels, transitions, bias."""
    T, A = x.shape
    F = np.zeros((A + H + 1) * H)
    for t in range(T):
        F[np.arange(A) * H + path[t]] += x[t]
        if fit_intercept:
            F[(A + H) * H + path[t]] += 1.0
        if t > 0:
            F[A * H + path[t - 1] * H + path[t]] += 1.0
    return F


def viterbi(x, w, H):
    """Best path, ties to the lowest state (as the core's ``viterbi``)."""
    T, A = x.shape
    W, trans, b = w[:A * H].reshape(A, H), w[A * H:(A + H) * H].reshape(H, H), w[-H:]
    emit = x @ W + b
    score, back = emit[0], []
    for t in range(1, T):
        cand = score[:, None] + trans
        back.append(np.argmax(cand, axis=0))
        score = cand.max(axis=0) + emit[t]
    path = [int(np.argmax(score))]
    for bp in reversed(back):
        path.append(int(bp[path[-1]]))
    return path[::-1]


def numpy_online(X, y, H, method, n_passes, fit_intercept, pa_type=1, c=1.0,
                 error_sensitive=True, averaging=True, variance=1.0, gamma=1.0):
    """CRFsuite's ap / pa / arow loops (no shuffling), dense."""
    A = X[0].shape[1]
    n_w = (A + H + 1) * H
    w, ws, cov = np.zeros(n_w), np.zeros(n_w), np.full(n_w, variance)
    u = 1
    for _ in range(n_passes):
        for x, lab in zip(X, y):
            v = viterbi(x, w, H)
            d = sum(a != b for a, b in zip(v, lab))
            if d:
                delta = features(x, lab, H, fit_intercept) - features(x, v, H, fit_intercept)
                margin = w @ features(x, v, H, fit_intercept) - w @ features(
                    x, lab, H, fit_intercept)
                if method == "ap":
                    tau = 1.0
                elif method == "pa":
                    cost = margin + (np.sqrt(d) if error_sensitive else 1.0)
                    norm2 = delta @ delta
                    tau = {0: cost / norm2, 1: min(c, cost / norm2),
                           2: cost / (norm2 + 0.5 / c)}[pa_type]
                if method == "arow":
                    cost = margin + d
                    beta = cost / (gamma + (delta ** 2 * cov).sum())
                    w += beta * cov * delta
                    cov = 1.0 / (1.0 / cov + delta ** 2 / gamma)
                else:
                    w += tau * delta
                    ws += tau * u * delta
            u += 1
    if method == "arow" or not averaging:
        return w
    return w - ws / u
