"""The sequence taggers' training loop (``TaggerTrainingLoopMixin``).

``_fit_prepared`` / ``_fit_batch`` run the passes of ``fit`` and
``partial_fit`` on a batch already read: the step-size calibration on the
first call, one kernel call or, with threads, the shared or sharded passes
(``_sharded_passes``: each thread a copy of the state on its shard, mixed
after the pass), the checks of the trained model. As ``linear/_training_loop.py``
is for the linear models; it relies on ``_BaseSequenceTagger``'s hooks and state.
"""
import copy
import time

import numpy as np
from sklearn.utils import check_random_state

from .._core._dataset import shuffled_order
from .._threads import ThreadRunner, effective_n_jobs, sharded_pass
from .._validation import (
    check_model_memory,
    diverged_error,
    unfit_on_error,
    warn_if_implausible,
)


class TaggerTrainingLoopMixin:
    """Passes, threads and checks of ``_BaseSequenceTagger`` (see the module
    docstring)."""

    def _fit_prepared(self, batch, *, n_epochs, allowed=None, callback=None):
        """``fit`` on a batch already read (by ``read_sequences(self, ...)``).

        The ``crfsuite.CRF`` facade's entry: ``allowed`` (a uint8 mask over
        the flat weights, ``CRFContext.set_allowed``) restricts the model to
        the weights that exist; ``callback(self)`` runs after every pass with
        ``_model`` current, and stops the training when it returns True.
        """
        self._validate_params()
        self._more_validate_params()
        self._n_threads()
        for attr in self._private_state:
            if attr != "_kind" and hasattr(self, attr):
                delattr(self, attr)
        with unfit_on_error(self, self._private_state):
            self.classes_ = self._check_labels(np.unique(batch.labels))
            if allowed is None and callback is None:    # (a trainer's own _fit_batch)
                return self._fit_batch(batch, n_epochs, first=True)
            return self._fit_batch(batch, n_epochs, first=True, allowed=allowed,
                                   callback=callback)

    def _fit_batch(self, batch, n_epochs, first, allowed=None, callback=None):
        label_idx = np.searchsorted(self.classes_, batch.labels).astype(np.int32)
        if first:
            rng = check_random_state(self.random_state)
            if allowed is None:
                self._new_state(batch.n_features, rng)
            else:
                self._new_state(batch.n_features, rng, allowed)
        else:
            self._grow(batch.n_features)
        if first:
            self.eta0_ = self._eta0(batch, label_idx)
        ds = batch.sequence_data(self._state.crf.n_attributes, label_idx)
        if callback is None:
            self.n_iter_ = self._passes(ds, n_epochs)
        else:
            self.n_iter_ = 0
            for _ in range(n_epochs):
                self.n_iter_ += self._passes(ds, 1)
                self._model = self._final_flat()
                self.t_ = self._state.crf.t
                if callback(self):
                    break
        self.t_ = self._state.crf.t
        self._model = self._final_flat()
        self._check_weight_scale(batch.n_tokens / batch.n_sequences)
        return self

    # ---- threads ------------------------------------------------------------------
    def _n_threads(self):
        """The threads ``n_jobs`` asks for (1 for a trainer without them);
        a ValueError naming ``n_jobs`` for a bad value."""
        n_jobs = getattr(self, "n_jobs", None)
        if not self._data_parallel:
            return 1
        return effective_n_jobs(n_jobs)

    def _passes(self, ds, n_epochs):
        """``n_epochs`` passes over ``ds``: one kernel call (``_run_passes``),
        or with several threads ``_threaded_passes``."""
        n_threads = self._n_threads()
        if n_threads <= 1 or ds.n_sequences < 2:
            return self._run_passes(ds, n_epochs)
        return self._threaded_passes(ds, n_epochs, n_threads)

    def _threaded_passes(self, ds, n_epochs, n_threads):
        """The passes on ``n_threads`` threads: one kernel call whose threads
        share the one state (``_shared_passes`` trainers: ``_run_passes``
        given the threads), else ``_sharded_passes``."""
        if not self._shared_passes:
            return self._sharded_passes(ds, n_epochs, n_threads)
        with ThreadRunner(n_threads) as runner:
            return self._run_passes(ds, n_epochs, threads=runner)

    def _sharded_passes(self, ds, n_epochs, n_threads):
        """Passes with the sequences of each split between threads.

        Each pass draws the order a one-thread pass would visit (the CRF
        state's seed, ``shuffled_order``) and cuts it into ``n_threads``
        contiguous shards of about equal work (tokens plus non-zeros,
        ``balanced_chunks``). Every thread gathers its shard's sequences
        (``SequenceData.take``) and runs the trainer's compiled kernel for one
        pass over them, without the GIL, on its own copy of the state; the
        copies are then mixed (``_mix_states``: the rules of
        ``sklearn_secondorder._mixing``, each shard weighted by its share of
        the sequences) into the state of the next pass. The partition and the
        order of the sums depend on the data, the seed and ``n_threads`` only,
        so a given ``n_jobs`` gives the same model bit for bit. The state is
        replaced only when every thread has finished without error. Returns
        the passes made.
        """
        H = self._n_states()
        check_model_memory(self, self._state.crf.n_attributes + H + 1, H,
                           (n_threads + 1) * self._bytes_per_weight())
        n = ds.n_sequences
        work = ds.token_counts() + ds.nnz_counts()
        worker = copy.copy(self)        # the same parameters, no shuffle, no output
        worker.shuffle, worker.verbose = False, 0
        passes = 0

        def shard_pass(shard, state):
            w = copy.copy(worker)
            w._state = state
            w._run_passes(ds.take(shard), 1)
            return w._state

        spare = []            # the last pass's copies, whose arrays the next reuses
        with ThreadRunner(n_threads) as runner:
            for _ in range(n_epochs):
                start = self._state
                began = time.perf_counter()
                if self.shuffle:
                    order, seed = shuffled_order(n, start.crf.seed)
                else:
                    order, seed = np.arange(n, dtype=np.intp), start.crf.seed
                mixed, states, shares = sharded_pass(
                    runner, start, order, work, shard_pass,
                    self._mix_shards, spare)
                mixed.crf.seed = seed
                # the pass's record: its wall time, the shards' mean loss
                mixed.pass_seconds = start.pass_seconds + [time.perf_counter() - began]
                if len(states[0].pass_losses) > len(start.pass_losses):
                    mixed.pass_losses = start.pass_losses + [float(sum(
                        p * st.pass_losses[-1] for p, st in zip(shares, states)))]
                self._state = mixed
                # (the first copy may live on in the mix; the others and the
                # replaced state are free)
                spare = [*states[1:], start]
                passes += 1
                if self.verbose:
                    self._print_threaded_pass()
                if self._threaded_stop(n):
                    break
        return passes

    def _mix_shards(self, states, weights, start):
        """Mix the threads' states of one pass (``_mix_states``; a trainer
        may let the mix reuse them: they are the fit's own)."""
        return self._mix_states(states, weights, start)

    def _print_threaded_pass(self):
        st = self._state
        loss = st.pass_losses[-1] if st.pass_losses else float("nan")
        print(f"-- pass {st.crf.passes}: mean -log p(y|x) {loss:.6g}, updates {st.crf.t} "
              "(threads, mixed)")

    def _threaded_stop(self, n_sequences):
        """Whether a threaded pass ends the training (default: never)."""
        return False

    def _check_weight_scale(self, mean_length):
        """Warn when the weights are implausibly large without overflowing:
        at the optimum ``alpha/2 ||w||^2 <= P(0)``, the mean ``-log p(y|x)`` at
        zero weights, ``T log H`` for a sequence of ``T`` tokens and ``H``
        states (as ``LinearClassifierBase._check_weight_scale``)."""
        # (einsum's own loop, not np.dot: a threaded BLAS call costs more in
        # waking its threads than the sum, and they spin on afterwards)
        with np.errstate(over="ignore", invalid="ignore"):
            penalty = 0.5 * self.alpha * float(np.einsum("i,i->", self._model, self._model))
        cost_of_zero = mean_length * np.log(max(self.classes_.size * self._n_latent(), 2))
        warn_if_implausible(self, penalty, cost_of_zero,
                            "Scale the feature values (e.g. StandardScaler) consistently "
                            "across calls, or use a smaller eta0.")

    def _check_info(self, result):
        """Record a kernel's passes; raise if they diverged."""
        st = self._state
        st.pass_seconds.extend(result.seconds)
        if not result.diverged:
            st.pass_losses.append(result.mean_loss)
        if result.diverged:
            raise diverged_error(type(self).__name__, st.crf.passes + 1)
        if self.verbose:
            print(f"-- pass {st.crf.passes}: mean -log p(y|x) {result.mean_loss:.6g}, "
                  f"updates {st.crf.t}")
