"""Checks and failure handling shared by every estimator of the package.

Each rule lives here once: the step-size and PSA-factor checks, the label
checks, the seed range, the weight-scale warning, the divergence error and
the rollback of a failed ``fit`` / ``partial_fit``.
"""
import contextlib
import dataclasses
import os
import sys
import warnings

import numpy as np
import sklearn
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

#: Exclusive upper bound of the seeds drawn for the kernels' shuffling RNG.
MAX_SEED = np.iinfo(np.int32).max


#: Frames in these directories are ours or scikit-learn's (``_fit_context``,
#: ``Pipeline``, ``GridSearchCV``): a warning names the first frame outside them.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                      for m in (sys.modules[__package__], sklearn))


def store_init_params(est, arguments):
    """Store a constructor's arguments on the estimator, each under its own name.

    scikit-learn's rule for ``__init__`` (``get_params``, ``clone``): every
    argument kept unchanged as an attribute of the same name, and nothing
    else. The estimators' constructors are that one line,
    ``store_init_params(self, locals())``.

    Parameters
    ----------
    est : estimator
        The estimator being constructed.
    arguments : dict
        The constructor's ``locals()``: its arguments, and ``self`` (skipped,
        as is the ``__class__`` cell of a constructor that calls ``super()``).
    """
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(est, name, value)


def user_stacklevel():
    """The ``stacklevel`` that attributes a warning to the user's line.

    Called by the function that warns, it counts the frames from there to the
    first one outside this package and scikit-learn, so the warning points at
    the user's ``est.fit(...)`` (or ``pipeline.fit(...)``) whatever the depth
    of the calls in between: a fixed number would name ``sklearn/base.py``.

    Returns
    -------
    stacklevel : int
        For ``warnings.warn`` called by the caller of this function.
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame, level = frame.f_back, level + 1
    return level


#: The compiled core indexes features with int32 (as scikit-learn's SGD).
MAX_FEATURES = int(np.iinfo(np.int32).max)


def available_memory():
    """Bytes this process can still allocate, or None where unknown.

    Linux's ``MemAvailable`` (``/proc/meminfo``), capped by what the cgroup
    (a container's limit) leaves; elsewhere the free physical pages.
    """
    available = None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                left = int(limit) - int(f.read())
            available = left if available is None else min(available, left)
    if available is None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return available


def _gib(n_bytes):
    return f"{n_bytes / 2 ** 30:.1f} GiB"


def check_available_memory(need, what):
    """Refuse, before allocating it, ``need`` bytes for ``what`` beyond the
    memory available (``available_memory``): a ``MemoryError`` naming both,
    instead of a process that the kernel kills when the pages are written."""
    available = available_memory()
    if available is not None and need > available:
        raise MemoryError(f"{what} needs {_gib(need)} ({int(need)} bytes), more than the "
                          f"{_gib(available)} of memory available: train on chunks of the "
                          "rows with partial_fit.")


def check_model_memory(est, n_features, n_outputs, bytes_per_weight):
    """Refuse, before anything is allocated, a model that cannot fit.

    The model holds ``n_features x n_outputs`` weights of ``bytes_per_weight``
    bytes of training state each (the weight, the estimator's per-weight
    state, the exported ``coef_``). NumPy's allocation of more than the
    memory available either fails late or, with Linux's overcommit, succeeds
    and gets the process killed when the pages are written; and the core
    indexes at most ``MAX_FEATURES`` features. Either way the remedy is to
    hash the features to fewer columns.

    Parameters
    ----------
    est : estimator
        The estimator about to allocate (named in the message).
    n_features : int
        Rows of the weight block: features (a tagger adds its bias and
        transition rows).
    n_outputs : int
        Weights per feature: classes, problems or label states.
    bytes_per_weight : int
        Bytes of training state per weight (the estimator's
        ``_bytes_per_weight``).

    Raises
    ------
    ValueError
        Naming the bytes needed and available, and the hashing remedies.
    """
    need = int(n_features) * int(n_outputs) * int(bytes_per_weight)
    available = available_memory()
    too_big = available is not None and need > available
    if not (too_big or n_features > MAX_FEATURES):
        return
    reason = (f"more than the {_gib(available)} of memory available" if too_big else
              f"and the compiled core indexes at most {MAX_FEATURES} (2**31 - 1) features")
    raise ValueError(
        f"{type(est).__name__}: a model of {n_features} features x {n_outputs} output(s) "
        f"needs {_gib(need)} ({need} bytes: {bytes_per_weight} bytes of state per weight), "
        f"{reason}. Hash the features to fewer columns: "
        "sklearn.feature_extraction.text.HashingVectorizer(n_features=2**20) (or "
        "FeatureHasher) in Python, skso train --hash-bits 20 on the command line.")


def draw_seed(rng):
    """A kernel seed in ``[1, MAX_SEED)`` (the xorshift state must not be 0)."""
    return int(rng.randint(1, MAX_SEED))


def check_label_types(labels, name):
    """Refuse labels that mix strings with other types.

    NumPy would turn them all into strings, or fail to sort them.
    """
    if isinstance(labels, np.ndarray) and labels.dtype.kind != "O":
        return
    if hasattr(labels, "dtype") and getattr(labels.dtype, "kind", "O") != "O":
        return                                     # e.g. a numeric pandas Series
    try:
        values = np.ravel(np.asarray(labels, dtype=object))
    except (TypeError, ValueError):
        return                                     # left to the usual checks
    is_str = [isinstance(v, str) for v in values]
    if any(is_str) and not all(is_str):
        other = values[is_str.index(False)]
        raise ValueError(f"{name} mixes string labels with labels of other types (e.g. "
                         f"{values[is_str.index(True)]!r} and {other!r}).")


def label_values(y):
    """The sorted distinct values of a 1-D target, as ``np.unique(y)``.

    Integer labels of a small range (also as floats, e.g. svmlight's +-1)
    are counted (``np.bincount``, one pass) instead of sorted: on 200,000
    rows a seventh of ``np.unique``'s time.
    """
    if y.dtype.kind in "iuf" and y.size > 1024:
        lo, hi = y.min(), y.max()
        if np.isfinite(lo) and np.isfinite(hi):
            # (the range in Python ints: in the labels' dtype it could wrap)
            lo, hi = int(np.floor(lo)), int(np.ceil(hi))
            if hi - lo <= 2 * y.size and -2**62 < lo and hi < 2**62:
                shifted = y.astype(np.int64) - lo
                if y.dtype.kind != "f" or np.array_equal(shifted + lo, y):
                    counts = np.bincount(shifted.astype(np.intp, copy=False))
                    return (np.flatnonzero(counts) + lo).astype(y.dtype)
    return np.unique(y)


def check_classes_arg(classes):
    """The ``classes`` argument of ``partial_fit``.

    Returns 1-D class labels (not continuous, no NaN, one type), sorted and
    unique.
    """
    check_label_types(classes, "classes")
    classes = column_or_1d(classes, warn=False)
    # (check_classification_targets would warn that more than half of the
    # "samples" are distinct classes: here every value is one, by definition)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The number of unique classes")
        check_classification_targets(classes)
    return np.unique(classes)


def check_psa_factors(est):
    """PSA's factor range: ``psa_beta < psa_alpha`` (Eq. 10).

    Each lies in (0, 1) by the parameter constraints.
    """
    if not est.psa_beta < est.psa_alpha:
        raise ValueError(f"psa_beta={est.psa_beta} must be smaller than "
                         f"psa_alpha={est.psa_alpha}")


def check_eta0(est, eta0=None):
    """A constant step must keep the L2 shrink ``1 - eta0 alpha`` positive.

    ``eta0`` is the parameter (default) or the step in use (e.g. calibrated,
    ``eta0_``); at or below 0 every step would wipe the weights.
    """
    eta0 = est.eta0 if eta0 is None else eta0
    if eta0 != "auto" and eta0 is not None and not eta0 * est.alpha < 1.0:
        raise ValueError(
            f"eta0={eta0!r} must satisfy eta0 * alpha < 1 (alpha={est.alpha!r}): the "
            "shrink 1 - eta0 * alpha of every step would wipe the weights.")


def diverged_error(name, epoch, remedy="lower eta0"):
    """The error raised when the weights overflow.

    ``remedy`` names the estimator's own step-size knob.
    """
    return ValueError(
        f"{name}: the weights overflowed (non-finite values) during pass {epoch}; "
        f"{remedy}, increase alpha, or scale the features (e.g. StandardScaler)."
    )


def warn_if_implausible(est, penalty, cost_of_zero, advice):
    """Warn when the weights are implausibly large without overflowing.

    At the optimum ``alpha/2 ||w||^2 <= P(w*) <= P(0)``: a model whose
    penalty alone is ten times ``cost_of_zero`` (the objective at ``w = 0``)
    is far worse than ``w = 0``; its steps were too large for the features'
    scale. Returns whether it warned.
    """
    if not penalty <= 10.0 * cost_of_zero:
        warnings.warn(
            f"{type(est).__name__}: the weights are implausibly large (alpha/2 ||w||^2 "
            f"= {penalty:.3g}, while the cost of w = 0 is at most {cost_of_zero:.3g}): "
            f"the steps were too large for the scale of the features. {advice}",
            UserWarning, stacklevel=user_stacklevel())
        return True
    return False


def remove_fitted(est, private):
    """Remove the public ``*_`` attributes and the ``private`` state of ``est``."""
    for name in list(vars(est)):
        if (name.endswith("_") and not name.startswith("__")) or name in private:
            delattr(est, name)


@contextlib.contextmanager
def unfit_on_error(est, private, continued=False):
    """Leave ``est`` unfitted if the body raises (no half-updated model).

    With ``continued=True`` (a later ``partial_fit``) a ``ValueError`` says
    that the state could not be continued.
    """
    try:
        yield
    except BaseException as exc:
        remove_fitted(est, private)
        if continued and isinstance(exc, ValueError):
            raise ValueError(f"{exc} The estimator is now unfitted: the state could not "
                             "be continued.") from exc
        raise


# ---- stopping, initialisation, deployment --------------------------------

def _margin_losses(name, z):
    """Per-row margin loss at ``z = y p`` (the equations of ``_losses.pyx``,
    vectorised for the per-pass monitoring; ``tests/test_contract.py`` checks
    them against its ``py_loss``)."""
    if name == "log_loss":
        return np.logaddexp(0.0, -z)
    if name == "hinge":
        return np.maximum(0.0, 1.0 - z)
    if name == "squared_hinge":
        return np.square(np.maximum(0.0, 1.0 - z))
    if name == "modified_huber":
        return np.where(z >= -1.0, np.square(np.maximum(0.0, 1.0 - z)), -4.0 * z)
    raise ValueError(f"unknown loss {name!r}")


def mean_margin_loss(name, scores, y, sample_weight):
    """Weighted mean loss of one problem.

    ``scores`` has one column (binary margin loss ``name``, ``y`` in +-1) or
    ``K`` (multinomial log loss, ``y`` class indices).
    """
    total = float(np.sum(sample_weight))
    if total <= 0:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        if scores.shape[1] == 1:
            loss = _margin_losses(name, y * scores[:, 0])
        else:
            idx = y.astype(np.intp)
            loss = logsumexp(scores, axis=1) - scores[np.arange(idx.size), idx]
        # (an elementwise sum: a threaded BLAS dot costs more in waking threads)
        return float(np.sum(sample_weight * loss)) / total


def best_constant_loss(name, y, sample_weight, n_outputs):
    """Weighted mean loss of the best constant model (intercepts only).

    The entropy of the weighted class shares for the multinomial log loss;
    for a binary margin loss the minimum over ``b`` of ``q+ l(b) + q- l(-b)``
    (``q+-``: weighted shares of the two targets).
    """
    total = float(np.sum(sample_weight))
    if total <= 0:
        return 0.0
    if n_outputs > 1:
        share = np.bincount(y.astype(np.intp), weights=sample_weight,
                            minlength=n_outputs) / total
        share = share[share > 0]
        return float(-np.sum(share * np.log(share)))
    q = float(np.sum(sample_weight[y > 0])) / total
    if q in (0.0, 1.0):
        return 0.0

    def f(b):
        return float(q * _margin_losses(name, np.array([b]))[0]
                     + (1 - q) * _margin_losses(name, np.array([-b]))[0])

    res = minimize_scalar(f, bounds=(-30.0, 30.0), method="bounded",
                          options={"xatol": 1e-8})
    return min(float(res.fun), f(0.0))


def warn_if_worse_than_constant(est, loss, constant_loss, accuracy, majority):
    """Warn that a fitted model is worse than the best constant model on its
    own training rows (the caller found its accuracy significantly below the
    majority class's).

    It happens when the features' scales are too far apart for the steps
    (e.g. unscaled measurements in the thousands beside fractions): the
    message names the remedy.
    """
    warnings.warn(
        f"{type(est).__name__}: the fitted model is worse than a constant one on its "
        f"own training data (accuracy {accuracy:.3f} below the majority class's "
        f"{majority:.3f}; mean loss {loss:.4g}, against {constant_loss:.4g} for the best "
        "intercept-only model). The features are probably on very different scales: "
        "scale them (e.g. make_pipeline(StandardScaler(), ...), or MaxAbsScaler for "
        "sparse data), or train longer (max_iter).", UserWarning,
        stacklevel=user_stacklevel())


def validation_split(y, sample_weight, validation_fraction, random_state, stratify=True):
    """The held-out rows of ``early_stopping``: a mask, as scikit-learn's
    ``SGDClassifier`` (``StratifiedShuffleSplit`` with ``random_state``) or,
    with ``stratify=False``, ``SGDRegressor`` (``ShuffleSplit``)."""
    n = y.shape[0]
    split = StratifiedShuffleSplit if stratify else ShuffleSplit
    cv = split(test_size=validation_fraction, random_state=random_state)
    try:
        idx_train, idx_val = next(cv.split(np.zeros((n, 1)), y))
    except ValueError as exc:
        raise ValueError(
            f"early_stopping cannot split {n} samples with validation_fraction="
            f"{validation_fraction!r} into {'stratified ' if stratify else ''}training and "
            "validation sets "
            f"({exc}). Change validation_fraction, give more samples, or set "
            "early_stopping=False.") from exc
    if idx_train.size == 0 or idx_val.size == 0:
        raise ValueError(
            f"Splitting {n} samples into a train set and a validation set with "
            f"validation_fraction={validation_fraction!r} led to an empty set "
            f"({idx_train.size} and {idx_val.size} samples). Please either change "
            "validation_fraction, increase number of samples, or disable early_stopping.")
    if not np.any(sample_weight[idx_val]):
        raise ValueError("The sample weights for validation set are all zero, consider "
                         "using a different random state.")
    mask = np.zeros(n, dtype=bool)
    mask[idx_val] = True
    return mask


def check_init_weights(coef_init, intercept_init, n_classes, n_features, fit_intercept):
    """``coef_init`` / ``intercept_init`` of ``fit`` as ``(n_rows,
    n_features)`` and ``(n_rows,)`` float64 arrays, ``n_rows`` being 1 for
    two classes, else ``n_classes`` (scikit-learn's shapes)."""
    n_rows = 1 if n_classes == 2 else n_classes
    if coef_init is None:
        coef = np.zeros((n_rows, n_features))
    else:
        coef = np.asarray(coef_init, dtype=np.float64)
        if n_rows == 1 and coef.ndim == 1:
            coef = coef[None, :]
        if coef.shape != (n_rows, n_features):
            raise ValueError(f"coef_init has shape {np.shape(coef_init)}; expected "
                             f"({n_rows}, {n_features}) for {n_classes} classes and "
                             f"{n_features} features.")
    if intercept_init is None:
        intercept = np.zeros(n_rows)
    else:
        intercept = np.atleast_1d(np.asarray(intercept_init, dtype=np.float64))
        if intercept.shape != (n_rows,):
            raise ValueError(f"intercept_init has shape {np.shape(intercept_init)}; "
                             f"expected ({n_rows},) for {n_classes} classes.")
        if not fit_intercept and np.any(intercept != 0):
            raise ValueError("intercept_init needs fit_intercept=True (without an "
                             "intercept it would stay fixed at its initial value).")
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise ValueError("coef_init and intercept_init must be finite.")
    return coef, intercept


def own_arrays(states):
    """Make every array of the training states writable, copying the
    read-only ones (a model loaded by ``joblib.load(..., mmap_mode='r')``
    holds read-only memory maps that the kernels cannot update)."""
    for state in states:
        _own(state, depth=2)


def _own(obj, depth):
    fields = (vars(obj) if hasattr(obj, "__dict__") else {})
    for name, value in list(fields.items()):
        if isinstance(value, np.ndarray):
            if not value.flags.writeable or isinstance(value, np.memmap):
                setattr(obj, name, np.array(value, copy=True, order="K"))
        elif depth > 1 and (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            _own(value, depth - 1)


def check_not_stripped(est):
    """Refuse to continue training a model whose state was dropped."""
    if not hasattr(est, "_states"):
        raise ValueError(
            f"{type(est).__name__}: the training state was dropped by "
            "strip_training_state(), so partial_fit cannot continue training; the "
            "model can still predict. Call fit to train a new model.")
