"""The training loop of the linear classifiers (``TrainingLoopMixin``).

``_fit_epochs`` runs the passes of ``fit`` / ``partial_fit`` on every
sub-problem (threads for one-vs-rest: the kernels release the GIL): one kernel
call per problem, or, when something watches the passes (``verbose``, ``tol``,
``early_stopping``), one pass at a time with scikit-learn's stopping rule
(``_monitored_passes``). The checks of the trained model live here too: the
weight-scale and worse-than-constant warnings and ``ConvergenceWarning``.
The mixin relies on ``LinearClassifierBase``'s hooks and state.
"""
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import safe_sparse_dot

from .._core._dataset import RowDataset
from .._penalty import split_alpha
from .._validation import (
    best_constant_loss,
    mean_margin_loss,
    user_stacklevel,
    warn_if_implausible,
    warn_if_worse_than_constant,
)

# the entries of X the worse-than-constant check scores at most
_CHECK_ENTRIES = 500_000


class TrainingLoopMixin:
    """Passes, stopping rule, progress lines and post-training checks of
    ``LinearClassifierBase`` (see the module docstring)."""

    def _fit_epochs(self, X, y, sample_weight, n_epochs, validation=None, stop=False):
        """Run up to ``n_epochs`` passes on every problem and export the model.

        The passes run in one kernel call per problem unless the estimator
        monitors them (``verbose``, ``tol`` with ``stop``, ``validation``):
        then one pass at a time, each followed by the evaluation the stopping
        rule or the progress line needs (``_monitored_passes``). A kernel's
        visiting order depends only on its RNG state, so both give the same
        model after the same passes (up to rounding: plain SGD folds its
        weight scale at the end of each call). Returns ``(converged,
        scale_warned)``: whether the stopping rule was met (True when there
        is none) and whether the weight-scale warning was raised.
        """
        if not hasattr(self, "_states"):
            self._reset_state(X.shape[1])
        self._begin_call(X, sample_weight)
        n_problems = len(self._states)
        monitor = bool(self.verbose) or validation is not None or (
            stop and self.tol is not None and n_epochs > 1)
        converged = True

        def run(p):
            targets = self._targets(y, p)
            if not monitor:
                return self._run_problem(X, targets, sample_weight, self._states[p],
                                         n_epochs), False
            val = None
            if validation is not None:
                val = (validation[0], self._targets(validation[1], p), validation[2])
            return self._monitored_passes(p, X, targets, sample_weight, n_epochs,
                                          val, stop)

        # X converted for the kernels once for the call (every problem and
        # pass takes its own targets on it: _row_dataset)
        self._call_rows = (X, RowDataset(X, np.zeros(X.shape[0]), sample_weight))
        try:
            if n_problems == 1:
                runs = [run(0)]
            else:
                runs = Parallel(n_jobs=self.n_jobs, require="sharedmem")(
                    delayed(run)(p) for p in range(n_problems))
        finally:
            del self._call_rows
        self.n_iter_ = int(max(r[0] for r in runs))
        if monitor and stop and self.tol is not None and n_epochs > 1:
            converged = all(r[1] for r in runs)
        self.t_ = int(max(s.t for s in self._states))
        self._export()
        used = sample_weight[sample_weight > 0]
        scale_warned = self._check_weight_scale(float(np.mean(used)) if used.size else 1.0)
        return converged, scale_warned

    def _row_dataset(self, X, y, sample_weight):
        """The kernels' ``RowDataset`` of ``(X, y, sample_weight)``: during
        ``_fit_epochs`` the rows of its ``X`` converted once for the call
        (``RowDataset.with_targets``), else converted now."""
        rows = getattr(self, "_call_rows", None)
        if rows is not None and rows[0] is X:
            return rows[1].with_targets(y, sample_weight)
        return RowDataset(X, y, sample_weight)

    def _monitored_passes(self, p, X, y, sample_weight, n_epochs, validation, stop):
        """One problem's passes one kernel call at a time, with scikit-learn's
        stopping rule and ``verbose`` lines.

        The rule is ``SGDClassifier``'s (``_plain_sgd``): a pass that does not
        improve the best value so far by ``tol`` counts as no improvement;
        ``n_iter_no_change`` of them in a row stop training. The value is
        the accuracy on the held-out rows with ``early_stopping``, else the
        training objective ``mean_i s_i loss_i / mean_i s_i + alpha/2
        ||w||^2`` at the end of the pass (``SGDClassifier`` sums the losses
        met during the pass, at the weights before each step: the kernels
        here do not track them, so one product ``X w`` per pass evaluates
        the objective exactly). Returns ``(passes, converged)``.
        """
        state = self._states[p]
        best, no_improvement, start = np.inf, 0, time.perf_counter()
        rows = int(np.count_nonzero(sample_weight))
        for epoch in range(1, n_epochs + 1):
            self._run_problem(X, y, sample_weight, state, 1)
            if validation is not None and stop and self.tol is not None:
                value = -self._problem_accuracy(state, *validation)
            if self.verbose or (validation is None and stop and self.tol is not None):
                loss, penalty = self._problem_objective(state, X, y, sample_weight)
                if validation is None:
                    value = loss + penalty
            if self.verbose:
                coef, intercept = self._final_weights(state)
                label = ("" if len(self._states) == 1 or self._is_multinomial()
                         else f" (class {self.classes_[p].tolist()!r})")
                print(f"-- {type(self).__name__}{label} pass {epoch}: rows {rows}, "
                      f"T {int(state.t)}, mean loss {loss:.6g}, ||w|| "
                      f"{float(np.sqrt(np.sum(np.square(coef)))):.4g}, bias "
                      f"{float(np.ravel(intercept)[0]):.6g}, "
                      f"{time.perf_counter() - start:.2f} s", flush=True)
            if not stop or self.tol is None:      # (scikit-learn: tol=None never stops)
                continue
            if value > best - self.tol:
                no_improvement += 1
            else:
                no_improvement = 0
            best = min(best, value)
            if no_improvement >= self.n_iter_no_change:
                if self.verbose:
                    print(f"-- {type(self).__name__}: convergence after {epoch} passes "
                          f"took {time.perf_counter() - start:.2f} s", flush=True)
                return epoch, True
        return n_epochs, False

    def _problem_scores(self, state, X):
        coef, intercept = self._final_weights(state)
        K = np.asarray(intercept).size
        W = np.asarray(coef).reshape(-1, K)
        return safe_sparse_dot(X, W, dense_output=True) + np.asarray(intercept)

    def _problem_objective(self, state, X, y, sample_weight):
        """The two terms of one problem's objective: ``sum_i s_i loss_i /
        sum_i s_i`` and the penalty ``lam/2 ||w||^2 + l1 ||w||_1`` (``alpha``
        split by ``penalty`` / ``l1_ratio``, ``_penalty.split_alpha``)."""
        scores = self._problem_scores(state, X)
        coef, _ = self._final_weights(state)
        loss = mean_margin_loss(getattr(self, "loss", "log_loss"), scores, y, sample_weight)
        lam, l1 = split_alpha(self)
        penalty = 0.5 * lam * float(np.sum(np.square(coef)))
        if l1:
            penalty += l1 * float(np.sum(np.abs(coef)))
        return loss, penalty

    def _problem_accuracy(self, state, X, y, sample_weight):
        """Weighted accuracy of one problem on its targets (+-1 or indices)."""
        scores = self._problem_scores(state, X)
        pred = (np.where(scores[:, 0] > 0, 1.0, -1.0) if scores.shape[1] == 1
                else scores.argmax(axis=1).astype(np.float64))
        return float(np.average(pred == y, weights=sample_weight))

    def _warn_unconverged(self, converged):
        """scikit-learn's ``ConvergenceWarning`` (``max_iter > 1``, ``tol`` set)."""
        if not converged and self.max_iter > 1:
            warnings.warn(
                f"{type(self).__name__}: maximum number of passes (max_iter="
                f"{self.max_iter}) reached before convergence (tol={self.tol}, "
                f"n_iter_no_change={self.n_iter_no_change}). Consider increasing "
                "max_iter to improve the fit.", ConvergenceWarning,
                stacklevel=user_stacklevel())

    def _warn_if_worse_than_constant(self, X, y, sample_weight):
        """Warn when the fitted model's training accuracy is below the
        majority class's by more than two standard errors
        (``warn_if_worse_than_constant``), on evenly spaced training rows
        holding at most ``_CHECK_ENTRIES`` entries (at least 2,000 rows; the
        standard error is that of the rows used)."""
        n = X.shape[0]
        per_row = X.nnz / max(n, 1) if hasattr(X, "nnz") else X.shape[1]
        n_check = max(2000, int(_CHECK_ENTRIES / max(per_row, 1.0)))
        if n > n_check:
            # (scoring every row of a large X costs a twentieth of a PSA
            # pass, in cache misses; 20,000 rows resolve a shortfall of about
            # 0.5%, and the copy stays small)
            rows = np.linspace(0, n - 1, n_check).astype(np.intp)
            X, y, sample_weight = X[rows], y[rows], sample_weight[rows]
        total_weight = float(np.sum(sample_weight))
        if total_weight <= 0:
            return
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        pred = (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(1)
        idx = np.searchsorted(self.classes_, y)
        # (elementwise sums, not np.dot: a threaded BLAS call costs more in
        # waking its threads than the sum)
        accuracy = float(np.sum(sample_weight[pred == idx])) / total_weight
        majority = float(np.max(np.bincount(idx, weights=sample_weight))) / total_weight
        # (the accuracy's standard error with the rows' effective number
        # (sum s)^2 / sum s^2: chance-level data must not warn)
        n_eff = total_weight ** 2 / float(np.sum(np.square(sample_weight)))
        margin = 2.0 * np.sqrt(majority * (1.0 - majority) / n_eff)
        if not accuracy < majority - margin:
            return
        loss_name = getattr(self, "loss", "log_loss")
        total, constant = 0.0, 0.0
        for p, state in enumerate(self._states):
            targets = self._targets(y, p)
            problem_scores = self._problem_scores(state, X)
            total += mean_margin_loss(loss_name, problem_scores, targets, sample_weight)
            constant += best_constant_loss(loss_name, targets, sample_weight,
                                           problem_scores.shape[1])
        warn_if_worse_than_constant(self, total, constant, accuracy, majority)

    def _check_weight_scale(self, mean_weight):
        """Warn when the weights are implausibly large without overflowing.

        At the optimum ``alpha/2 ||w||^2 <= P(w*) <= P(0)``, the (weighted)
        mean loss at zero weights: ``mean_weight`` (the mean sample weight,
        class weights included) times 1 for the margin losses or ``log K``
        for the multinomial log loss. A model whose penalty alone is ten times
        that is worse than ``w = 0`` by far: its steps were too large for the
        features' scale.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            penalty = 0.5 * self.alpha * float(np.sum(np.square(self.coef_)))
        n_problems, n_outputs = self._problem_count()
        return warn_if_implausible(
            self, penalty, mean_weight * n_problems * max(1.0, np.log(n_outputs)),
            "Scale the features (e.g. StandardScaler) consistently across calls, or use "
            "smaller steps.")
