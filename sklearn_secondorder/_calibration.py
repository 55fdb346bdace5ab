"""Step-size calibration on a sample of rows or sequences (Bottou's recipe).

Bottou ("Stochastic gradient descent tricks", 2012, and ``svmasgd.cpp``'s
``determineEta0``): run one pass with a constant step ``eta`` over a sample
of about 1000 rows, starting from the current weights; try ``eta`` doubling
and halving from a start value, keep the one with the lowest regularized
objective, and return half of it for safety (the full data are noisier than
the sample).
"""
import warnings

import numpy as np
import scipy.sparse as sp

from ._core._crf_infer import objective
from ._core._crf_sgd import CRFSGDOptions, CRFState, sgd_epochs
from ._core._dataset import RowDataset
from ._core._sgd_fast import LinearSGDOptions, trial_pass
from ._core._weights import ScaledWeights
from ._validation import draw_seed, user_stacklevel

#: Rows up to which ``calibrate_linear_eta0`` draws its sample as earlier
#: versions did (``RandomState.choice``, a permutation of the rows: under a
#: millisecond here), so that a small fit keeps its model for the same
#: ``random_state``; a larger X takes a Generator's O(sample) draw.
LEGACY_DRAW_ROWS = 50_000


def calibrate_linear_eta0(X, y, sample_weight, coef, intercept, *, loss, n_outputs, lam,
                          fit_intercept, random_state, n_samples=1000, eta_start=0.1,
                          factor=2.0, max_trials=20, l1=0.0, column_scale=None,
                          bound_steps=False, held_out=False):
    """Pick a constant step size on a random sample of rows.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    y, sample_weight : ndarray of shape (n_samples,)
        Targets as the kernels take them (+-1, or class indices).
    coef, intercept : ndarray
        Current weights (flat ``(n_features * n_outputs,)``, ``(n_outputs,)``);
        not modified.
    loss : Loss or None
        Binary loss, or None for the multinomial log loss.
    lam : float
        L2 strength (``_penalty.split_alpha``).
    fit_intercept : bool
    random_state : numpy.random.RandomState
        Draws the sample rows.
    l1 : float
        L1 strength: with ``l1 > 0`` the trial passes step with the cumulative
        L1 penalty and the objective includes ``l1 ||w||_1``.
    column_scale : ndarray of shape (n_features,) or None
        Per-column scales ``s_j`` of a kernel whose step sizes start at
        ``eta0 / s_j^2`` (the regressors): the trials run on the sample's
        columns divided by them, where one ``eta0`` is every column's step
        (the kernel's steps in the weights ``s_j w_j``; the trials penalise
        those weights, which only the step's choice reads). Needs zero
        weights.
    held_out : bool
        Score each trial pass on as many other rows (drawn with the sample),
        not on its own: on noisy targets a step that fits its 1000 rows best
        is too large for a pass over many more (regression).
    bound_steps : bool
        The trial passes bound the steps as the kernel does (regression);
        the steps tried are at most ``1 / median_i ||x_i||^2`` (with the
        intercept), beyond which a typical row's step is cut by the bound.

    Returns
    -------
    eta0 : float
        Half of the best constant step found (the best one with ``held_out``).
    """
    rows = _draw_rows(X.shape[0], 2 * n_samples if held_out else n_samples, random_state)
    scored = None
    if held_out and rows.size >= 2:
        # (every other row of the sorted draw: both halves span the file)
        scored, rows = rows[1::2], rows[0::2]
    X_sample = _scaled(X[rows], column_scale)
    largest = _largest_step(X_sample, fit_intercept) if bound_steps else np.inf
    held = None
    if scored is not None:
        X_scored = _scaled(X[scored], column_scale)
        # (both halves restricted to the columns either uses, as _sample_columns)
        both, coef = _sample_columns(
            sp.vstack([X_sample, X_scored], format="csr") if sp.issparse(X_sample)
            else X_sample, coef, n_outputs)
        if sp.issparse(both):
            X_sample, X_scored = both[:X_sample.shape[0]], both[X_sample.shape[0]:]
        held = RowDataset(X_scored, y[scored], sample_weight[scored])
    else:
        X_sample, coef = _sample_columns(X_sample, coef, n_outputs)
    ds = RowDataset(X_sample, y[rows], sample_weight[rows])

    def objective(eta, scored=held):
        if eta > largest:
            return np.inf
        return trial_pass(ds, coef, intercept,
                          LinearSGDOptions(lam=lam, l1=l1, learning_rate="constant", eta0=eta),
                          loss=loss, n_outputs=n_outputs, fit_intercept=fit_intercept,
                          bound_steps=bound_steps, held_out=scored)

    eta_start = min(eta_start, largest)
    if held is not None:
        # a step chosen on held-out rows is already the one that generalises
        # (Bottou halves the best step of its sample's own fit for safety),
        # unless they favour no step at all (too few rows, or features that
        # do not predict the target): then the sample's own fit, halved
        with warnings.catch_warnings(record=True) as limit:
            warnings.simplefilter("always")
            eta = search_step(objective, eta_start=eta_start, factor=factor,
                              max_trials=max_trials)
        if not limit:
            return eta
    return search_step(lambda eta: objective(eta, None), eta_start=eta_start, factor=factor,
                       max_trials=max_trials) / 2.0


def _draw_rows(n, size, random_state):
    """``min(n, size)`` sorted rows drawn without replacement."""
    size = min(n, size)
    if n <= LEGACY_DRAW_ROWS:
        return np.sort(random_state.choice(n, size=size, replace=False))
    # (a Generator's draw without replacement takes O(size); the legacy
    # RandomState's permutes all n rows)
    return np.sort(np.random.default_rng(draw_seed(random_state)).choice(
        n, size=size, replace=False, shuffle=False))


def _scaled(X_rows, column_scale):
    """The rows with each column divided by its scale (None: as they are)."""
    if column_scale is None:
        return X_rows
    if sp.issparse(X_rows):
        return (X_rows @ sp.diags(1.0 / column_scale)).tocsr()
    return X_rows / column_scale


def _largest_step(X_sample, fit_intercept):
    """The largest step worth trying with bounded steps, which never diverge:
    one that would take a typical row (the median squared norm, the
    intercept's 1 included) past its own target counts as diverged, so the
    largest is the step that fits a typical row exactly (the normalised LMS
    step)."""
    sq = (np.asarray(X_sample.multiply(X_sample).sum(axis=1)).ravel()
          if sp.issparse(X_sample) else np.einsum("ij,ij->i", X_sample, X_sample))
    sq = sq + (1.0 if fit_intercept else 0.0)
    return 1.0 / float(np.median(sq[sq > 0])) if np.any(sq > 0) else np.inf


def used_columns(X_sample):
    """A sparse sample restricted to the columns it uses.

    A trial pass from zero weights moves only the sample's columns (the
    others stay 0: no loss term, no penalty), so restricted to them it makes
    the same steps in O(sample) instead of O(n_features) per dense step (a
    hashed model has far more columns than 1000 rows touch). Shared by the
    ``eta0`` calibration and SGD-QN's ``t0`` trials.

    Returns
    -------
    X_used : CSR matrix or the input
        ``X_sample[:, cols]``; the input itself (and ``cols = None``) when
        it is dense, has no more columns than entries, or uses every column.
    cols : ndarray or None
        The columns used, sorted.
    """
    if not sp.issparse(X_sample) or X_sample.shape[1] <= X_sample.nnz:
        # (no more columns than entries: a dense step over them costs no more
        # than the sample's, and finding the used ones costs a sort)
        return X_sample, None
    cols, position = np.unique(X_sample.indices, return_inverse=True)
    if cols.size == X_sample.shape[1]:
        return X_sample, None
    compact = sp.csr_matrix(
        (X_sample.data, position.astype(X_sample.indices.dtype), X_sample.indptr),
        shape=(X_sample.shape[0], cols.size))
    return compact, cols


def _sample_columns(X_sample, coef, n_outputs):
    """``used_columns`` with the weights of those columns, when the other
    weights are all 0 (else the sample and weights as they are: a trial
    pass shrinks every non-zero weight)."""
    compact, cols = used_columns(X_sample)
    W = np.reshape(coef, (-1, n_outputs))
    if cols is None or np.count_nonzero(W[cols]) != np.count_nonzero(W):
        return X_sample, coef
    return compact, np.ascontiguousarray(W[cols]).ravel()


def sample_attributes(X_sample, coef, allowed, n_attributes, n_states):
    """A sample of sequences restricted to the attributes it uses, when the
    other attributes' weights are all 0 (else everything as it is).

    ``used_columns`` for a CRF: a trial pass from such weights moves only
    the sample's attribute rows (the others stay 0) besides the transitions
    and the bias, so restricted to them it makes the same steps and gives the
    same objective, without copying and averaging a model of every
    attribute at each trial (62 MB on CoNLL-2000 with 23 labels).

    Parameters
    ----------
    X_sample : CSR matrix of shape (n_tokens, n_columns)
        The sample's tokens (columns at or past ``n_attributes`` are unknown
        to the model: no row reads them).
    coef : ndarray
        The flat CRF weights (``CRFState.coef``): ``n_attributes`` rows of
        ``n_states``, the transitions' rows, the bias.
    allowed : uint8 ndarray or None
        The weights that exist, in ``coef``'s layout.
    n_attributes, n_states : int

    Returns
    -------
    X_used : CSR matrix
    coef_used, allowed_used : ndarray (``allowed_used`` None with ``allowed``)
    n_used : int
        The attributes of the restricted model.
    """
    W = np.reshape(coef, (-1, n_states))
    cols = np.unique(X_sample.indices)
    cols = cols[cols < n_attributes]
    if np.count_nonzero(W[cols]) != np.count_nonzero(W[:n_attributes]):
        return X_sample, coef, allowed, n_attributes
    rows = np.concatenate([cols, np.arange(n_attributes, W.shape[0])])
    if allowed is not None:
        allowed = np.ascontiguousarray(np.reshape(allowed, (-1, n_states))[rows]).ravel()
    return (sp.csr_matrix(X_sample)[:, cols], np.ascontiguousarray(W[rows]).ravel(), allowed,
            cols.size)


def calibrate_crf_eta0(ds_sample, coef, *, n_states, n_latent, lam, fit_intercept,
                       averaged=False, eta_start=0.1, factor=2.0, max_trials=20,
                       l1=0.0, allowed=None):
    """Bottou's step-size calibration on a sample of sequences.

    From (a copy of) the current weights, run one pass with a constant step
    ``eta`` over the sample and measure the regularised objective
    ``lam/2 ||w||^2 + mean -log p(y|x)`` after it. Starting at
    ``eta_start``, double ``eta`` while the objective improves, else halve it
    while it improves; return half of the best ``eta`` for safety (Bottou
    2012, "Stochastic gradient descent tricks"; CRFsuite's l2sgd calibration
    uses the same start 0.1 and rate 2). With ``averaged=True`` the objective
    is measured at the average of the trial pass's iterates, the model an
    averaging method returns (ASF after its first period, averaged SGD).
    With ``l1 > 0`` the trial passes step with the cumulative L1 penalty and
    the objective is ``l1 ||w||_1 + lam/2 ||w||^2 + mean -log p``.

    Parameters
    ----------
    ds_sample : SequenceData
        The sample, with labels.
    coef : ndarray
        The current flat CRF weights (``CRFState.coef``); not modified.
    n_states, n_latent : int
    lam : float
        L2 strength (``_penalty.split_alpha``).
    fit_intercept, averaged : bool
    eta_start, factor : float
    max_trials : int
    l1 : float
        L1 strength.
    allowed : uint8 ndarray or None
        The weights that exist (``CRFContext.set_allowed``): the trial passes
        train the model the trainer will (CRFsuite's feature set).

    Returns
    -------
    eta0 : float
    """
    alpha = lam + l1        # (the schedule's whole strength)

    def trial(eta):
        if alpha > 0 and eta * alpha >= 1.0:
            return np.inf
        coef_copy = np.array(coef, dtype=np.float64)
        state = CRFState(coef=coef_copy, avg=np.zeros_like(coef_copy) if averaged else None,
                         n_states=n_states,
                         l1_q=np.zeros_like(coef_copy) if l1 > 0 else None)
        if allowed is not None:
            state.allowed = allowed
        options = CRFSGDOptions(eta0=eta, power=0.0, lam=lam, l1=l1, average=averaged)
        if sgd_epochs(ds_sample, state, options, shuffle=False, fit_intercept=fit_intercept,
                      n_latent=n_latent).diverged:
            return np.inf
        model = state.model()
        obj = objective(ds_sample, ScaledWeights(model, n_states), lam, n_latent)
        if l1 > 0:
            obj += l1 * float(np.abs(model).sum())
        return obj

    return search_step(trial, eta_start=eta_start, factor=factor, max_trials=max_trials) / 2.0


def search_step(objective, *, eta_start=0.1, factor=2.0, max_trials=20):
    """The constant step with the lowest ``objective(eta)`` on a geometric walk.

    From ``eta_start``, multiply by ``factor`` while the objective improves;
    if the first move does not improve, divide instead (Bottou's
    ``determineEta0``). ``objective`` returns ``inf`` for a diverged trial.

    Returns
    -------
    eta : float
        The best step tried (callers halve it for safety).
    """
    best_eta, best_obj = eta_start, objective(eta_start)
    at_limit = False
    for direction in (factor, 1.0 / factor):
        eta = best_eta
        for _ in range(max_trials):
            eta *= direction
            obj = objective(eta)
            if not obj < best_obj:
                break
            best_eta, best_obj = eta, obj
        else:
            at_limit = True
        if best_eta != eta_start:
            break
    if not np.isfinite(best_obj):
        raise ValueError("step-size calibration diverged for every candidate; scale X "
                         "or pass eta0 explicitly")
    if at_limit:
        warnings.warn(
            f"step-size calibration stopped at its limit of {max_trials} trials (eta="
            f"{best_eta:.3g}, still improving): the features are probably badly scaled "
            "(e.g. use StandardScaler), or pass eta0 explicitly.", UserWarning,
            stacklevel=user_stacklevel())
    return best_eta
