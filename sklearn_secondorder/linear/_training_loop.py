"""The training loop of the linear classifiers (``TrainingLoopMixin``).

``_fit_epochs`` runs the passes of ``fit`` / ``partial_fit`` on every
sub-problem (threads for one-vs-rest: the kernels release the GIL): one kernel
call per problem, or, when something watches the passes (``verbose``, ``tol``,
``early_stopping``), one pass at a time with scikit-learn's stopping rule
(``_monitored_passes``). The checks of the trained model live here too: the
weight-scale and worse-than-constant warnings and ``ConvergenceWarning``.
The mixin relies on ``LinearClassifierBase``'s hooks and state.
"""
import copy
import time
import warnings

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import safe_sparse_dot

from .._core._dataset import RowDataset, shuffled_order
from .._penalty import split_alpha
from .._threads import ThreadRunner, effective_n_jobs, sharded_pass
from .._validation import (
    best_constant_loss,
    check_model_memory,
    mean_margin_loss,
    user_stacklevel,
    warn_if_implausible,
    warn_if_worse_than_constant,
)

# the worse-than-constant check scores every row of an X of at most
# _CHECK_ALL_ENTRIES entries (copying a subsample costs as much as scoring
# them), else evenly spaced rows holding about _CHECK_ENTRIES entries
_CHECK_ALL_ENTRIES = 2_000_000
_CHECK_ENTRIES = 250_000


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

        # one problem (binary, or multinomial) and several threads: the rows
        # of each pass are split between them (_sharded_passes); several
        # one-vs-rest problems run side by side instead (each on one thread)
        n_threads = (effective_n_jobs(getattr(self, "n_jobs", None)) if n_problems == 1
                     else 1)
        if n_threads > 1:
            self._check_thread_memory(X.shape[1], n_threads)
            if sp.issparse(X) and not X.has_canonical_format:
                # (once for every thread: a kernel that merges a row's
                # duplicate features would otherwise copy X in each shard)
                X = X.copy()
                X.sum_duplicates()

        def run(p):
            targets = self._targets(y, p)
            if not monitor:
                return self._passes(p, X, targets, sample_weight, n_epochs), False
            val = None
            if validation is not None:
                val = (validation[0], self._targets(validation[1], p), validation[2])
            return self._monitored_passes(p, X, targets, sample_weight, n_epochs,
                                          val, stop)

        # X converted for the kernels once for the call (every problem and
        # pass takes its own targets on it: _row_dataset)
        self._call_rows = (X, RowDataset(X, np.zeros(X.shape[0]), sample_weight))
        self._call_threads = n_threads
        try:
            if n_problems == 1:
                runs = [run(0)]
            else:
                runs = Parallel(n_jobs=self.n_jobs, require="sharedmem")(
                    delayed(run)(p) for p in range(n_problems))
        finally:
            del self._call_rows
            del self._call_threads
        self.n_iter_ = int(max(r[0] for r in runs))
        if monitor and stop and self.tol is not None and n_epochs > 1:
            converged = all(r[1] for r in runs)
        elif stop and self.tol is not None and n_epochs == 1:
            # (one pass cannot meet the rule: n_iter_no_change passes without
            # improvement; scikit-learn's SGD warns then too)
            converged = False
        self.t_ = int(max(s.t for s in self._states))
        used = sample_weight[sample_weight > 0]
        stream = getattr(self, "_stream", None)
        if stream is not None:          # (its end exports and checks: end_stream)
            stream.weight_sum += float(used.sum())
            stream.rows += used.size
            return converged, False
        self._export()
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

    def _passes(self, p, X, y, sample_weight, n_epochs):
        """``n_epochs`` passes of problem ``p``: one kernel call, or with
        several threads (``n_jobs`` on one problem) ``_threaded_passes``."""
        n_threads = getattr(self, "_call_threads", 1)
        if n_threads <= 1:
            return self._run_problem(X, y, sample_weight, self._states[p], n_epochs)
        return self._threaded_passes(p, X, y, sample_weight, n_epochs, n_threads)

    #: Whether the kernel shares each pass between threads on the one state
    #: (``_run_problem(..., threads=ThreadRunner)``: no copies, no mix)
    #: rather than each thread training a copy on a shard of the rows.
    _threads_share_state = False

    def _shares_passes(self, state, n_threads):
        """With ``_threads_share_state``: whether ``n_threads`` threads share
        this state's passes; where they would not pay, one thread runs them."""
        return True

    def _threaded_passes(self, p, X, y, sample_weight, n_epochs, n_threads):
        """Problem ``p``'s passes on ``n_threads`` threads: shared passes on
        the one state (``_threads_share_state``, where ``_shares_passes``),
        else ``_sharded_passes``."""
        if not self._threads_share_state:
            return self._sharded_passes(p, X, y, sample_weight, n_epochs, n_threads)
        state = self._states[p]
        if not self._shares_passes(state, n_threads):
            return self._run_problem(X, y, sample_weight, state, n_epochs)
        with ThreadRunner(n_threads) as runner:
            return self._run_problem(X, y, sample_weight, state, n_epochs, threads=runner)

    def _check_thread_memory(self, n_features, n_threads):
        """Refuse, before any pass, threads whose state copies cannot fit:
        each thread trains its own copy of the state and the mix makes one
        more (``check_model_memory`` with ``n_threads + 1`` times the bytes
        of one model's state). Threads that share the one state add only
        their small buffers to it (PSA's round buffers of a few hundred KiB,
        SBM's ``O(K P)``), whose memory the allocation checks."""
        if self._threads_share_state:
            return
        n_problems, n_outputs = self._problem_count()
        check_model_memory(self, n_features, n_problems * n_outputs,
                           (n_threads + 1) * self._bytes_per_weight(n_features, n_outputs))

    def _sharded_passes(self, p, X, y, sample_weight, n_epochs, n_threads):
        """Problem ``p``'s passes with the rows of each split between threads.

        Each pass draws the visiting order a one-thread pass would (the
        state's seed, ``shuffled_order``) and cuts it into ``n_threads``
        contiguous shards of about equal non-zeros (``balanced_chunks``).
        Every thread runs the compiled kernel (without the GIL) for one pass
        over its shard, in that order, on its own copy of the state; the
        copies are then mixed (the estimator's ``_mix_states``, the rules of
        ``sklearn_secondorder._mixing``, each shard weighted by its share of
        the rows) into the state of the next pass. The partition and the
        order of the sums depend on the data, the seed and ``n_threads``
        only, so a given ``n_jobs`` gives the same model bit for bit. The
        state is replaced only when every thread has finished without error.
        Returns the passes made.
        """
        state = self._states[p]
        rows = self._call_rows[1]
        n = X.shape[0]
        # the first-data choices (step size, period, t0, ...) on all the rows,
        # as the one-thread kernel call makes them
        self._run_problem(X, y, sample_weight, state, 0)
        if sp.issparse(X):
            work = np.diff(np.asarray(X.indptr, dtype=np.int64)) + 1
        else:
            work = np.full(n, X.shape[1] + 1, dtype=np.int64)
        worker = copy.copy(self)          # the same parameters, no shuffle, no output
        worker.shuffle, worker.verbose = False, 0

        def shard_pass(shard, local):
            w = copy.copy(worker)
            w._call_rows = (X, _RowShard(rows, shard))
            w._run_problem(X, y, sample_weight, local, 1)
            return local

        spare = []            # the last pass's copies, whose arrays the next reuses
        with ThreadRunner(n_threads) as runner:
            for _ in range(n_epochs):
                seed = self._shuffle_seed(state)
                if self.shuffle:
                    order, seed = shuffled_order(n, seed)
                else:
                    order = np.arange(n, dtype=np.intp)
                mixed, locals_, _ = sharded_pass(
                    runner, state, order, work, shard_pass,
                    self._mix_shards, spare)
                self._set_shuffle_seed(mixed, seed)
                self._states[p] = mixed
                # (the first copy may live on in the mix; the others and the
                # replaced state are free)
                spare = [*locals_[1:], state]
                state = mixed
        return n_epochs

    def _mix_shards(self, states, weights, start):
        """Mix the threads' states of one pass (``_mix_states``; an
        estimator may let the mix reuse them: they are the fit's own)."""
        return self._mix_states(states, weights, start)

    def _shuffle_seed(self, state):
        """The shuffling seed of a problem's state (default: ``state.seed``)."""
        return state.seed

    def _set_shuffle_seed(self, state, seed):
        state.seed = seed

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
        best, no_improvement, start = np.inf, 0, time.perf_counter()
        rows = int(np.count_nonzero(sample_weight))
        for epoch in range(1, n_epochs + 1):
            self._passes(p, X, y, sample_weight, 1)
            state = self._states[p]         # (replaced by a threaded pass)
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
                if self._lower_step(state):
                    no_improvement = 0
                    continue
                if self.verbose:
                    print(f"-- {type(self).__name__}: convergence after {epoch} passes "
                          f"took {time.perf_counter() - start:.2f} s", flush=True)
                return epoch, True
        return n_epochs, False

    def _lower_step(self, state):
        """On ``n_iter_no_change`` passes without improvement: whether the
        estimator lowers its step and goes on (scikit-learn's ``'adaptive'``
        schedule) instead of stopping (default: stop)."""
        return False

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
        loss = self._mean_loss(scores, y, sample_weight)
        lam, l1 = split_alpha(self)
        penalty = 0.5 * lam * float(np.sum(np.square(coef)))
        if l1:
            penalty += l1 * float(np.sum(np.abs(coef)))
        return loss, penalty

    def _mean_loss(self, scores, y, sample_weight):
        """``sum_i s_i loss_i / sum_i s_i`` of one problem's ``scores``
        (``mean_margin_loss``)."""
        return mean_margin_loss(getattr(self, "loss", "log_loss"), scores, y, sample_weight)

    def _problem_accuracy(self, state, X, y, sample_weight):
        """Weighted accuracy of one problem on its targets (+-1 or indices)."""
        scores = self._problem_scores(state, X)
        pred = (np.where(scores[:, 0] > 0, 1.0, -1.0) if scores.shape[1] == 1
                else scores.argmax(axis=1).astype(np.float64))
        return float(np.average(pred == y, weights=sample_weight))

    #: Whether one pass (``max_iter=1``) with ``tol`` set warns too, as
    #: scikit-learn's SGD does (the plain SGD drop-ins), not only several
    #: (the methods built for one pass).
    _warn_single_pass = False

    def _warn_unconverged(self, converged):
        """scikit-learn's ``ConvergenceWarning`` (``tol`` set, ``max_iter > 1``
        or ``_warn_single_pass``)."""
        if not converged and (self.max_iter > 1 or self._warn_single_pass):
            warnings.warn(
                f"{type(self).__name__}: maximum number of passes (max_iter="
                f"{self.max_iter}) reached before convergence (tol={self.tol}, "
                f"n_iter_no_change={self.n_iter_no_change}). Consider increasing "
                "max_iter to improve the fit.", ConvergenceWarning,
                stacklevel=user_stacklevel())

    def _warn_if_worse_than_constant(self, X, y, sample_weight):
        """Warn when the fitted model's training accuracy is below the
        majority class's by more than two standard errors
        (``warn_if_worse_than_constant``), on every training row of an X of
        at most ``_CHECK_ALL_ENTRIES`` entries, else on evenly spaced rows
        holding about ``_CHECK_ENTRIES`` entries (at least 2,000 rows; the
        standard error is that of the rows used)."""
        n = X.shape[0]
        entries = X.nnz if hasattr(X, "nnz") else X.size
        n_check = max(2000, int(_CHECK_ENTRIES * n / max(entries, 1)))
        if entries > _CHECK_ALL_ENTRIES and n_check < n:
            # (scoring every row of a large X costs a twentieth of a PSA
            # pass, in cache misses; 10,000 rows resolve a shortfall of about
            # 1% from a majority of 80%, and the copy stays small)
            rows = np.linspace(0, n - 1, n_check).astype(np.intp)
            X, y, sample_weight = X[rows], y[rows], sample_weight[rows]
        total_weight = float(np.sum(sample_weight))
        if total_weight <= 0:
            return
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        pred = (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(1)
        # (two classes: one comparison, not a search)
        idx = ((y == self.classes_[1]).astype(np.intp) if self.classes_.size == 2
               else np.searchsorted(self.classes_, y))
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
            # (einsum's own loop: one pass, no temporary, no threaded BLAS)
            penalty = 0.5 * self.alpha * float(np.einsum("ij,ij->", self.coef_, self.coef_))
        n_problems, n_outputs = self._problem_count()
        return warn_if_implausible(
            self, penalty, mean_weight * n_problems * max(1.0, np.log(n_outputs)),
            "Scale the features (e.g. StandardScaler) consistently across calls, or use "
            "smaller steps.")


class _RowShard:
    """One thread's shard of a pass: ``with_targets`` gives the dataset over
    those rows of the call's converted ``X``, in the shard's order
    (``RowDataset.with_targets(..., rows=)``, no copy of ``X``)."""

    def __init__(self, rows, order):
        self.rows, self.order = rows, order

    def with_targets(self, y, sample_weight):
        return self.rows.with_targets(y, sample_weight, rows=self.order)
