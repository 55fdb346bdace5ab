"""The arithmetic of parameter mixing, shared by every state's ``mix``.

Parameter mixing (McDonald, Hall and Mann, NAACL 2010) combines models
trained on disjoint shards of the rows, all from the same start, into one.
Each kind of training state has its own ``mix`` beside it (the linear
estimators' modules, ``sequence/_base.py``); they are built from the three
rules here, and from :func:`mix_lazy_steps` for PSA's step-size state, which
linear PSA and the PSA tagger share:

- a *weighted mean* ``sum_w p_w a_w`` for the weights themselves (``p_w``:
  the share of the rows each model saw);
- *summed increments* ``start + sum_w (a_w - start)`` for the statistics that
  sum over the rows seen (update counters, running sums of iterates, the
  curvature a second-order method accumulated);
- a *geometric mean* ``exp(sum_w p_w log a_w)`` for positive rates that
  change by factors (PSA's step sizes).

The same functions serve the Dask meta-estimator, which mixes after every
pass over a cluster, and in-memory training on shards of one machine's rows.
"""
import copy

import numpy as np


def weighted_mean(arrays, weights):
    """``sum_w p_w a_w`` in float64.

    Parameters
    ----------
    arrays : sequence of array-like, all of one shape
    weights : sequence of float
        The models' shares ``p_w`` (they should sum to 1).

    Returns
    -------
    mean : ndarray
    """
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, pw in zip(arrays, weights):
        out += pw * np.asarray(a, dtype=np.float64)
    return out


def sum_increments(values, start):
    """``start + sum_w (v_w - start)``: a statistic that sums over the rows seen.

    Parameters
    ----------
    values : sequence of float or ndarray
        The statistic of every model, each continued from ``start``.
    start : float or ndarray
        Its value when the models started (0 for a fresh start).

    Returns
    -------
    total : float or ndarray
    """
    total = start
    for v in values:
        total = total + (v - start)
    return total


def geometric_mean(arrays, weights):
    """``exp(sum_w p_w log a_w)`` (every ``a_w > 0``).

    Where every model has the same value the mean is that value, exactly
    (the weights sum to 1): the logarithms are taken only where the models
    differ. Most of a wide model's step sizes are those no shard adapted, so
    this is also most of the cost saved.

    Parameters
    ----------
    arrays : sequence of array-like of positive values, all of one shape
    weights : sequence of float

    Returns
    -------
    mean : ndarray
    """
    arrays = [np.asarray(a) for a in arrays]
    out = np.array(arrays[0], dtype=np.float64)
    differ = np.zeros(out.shape, dtype=bool)
    for a in arrays[1:]:
        differ |= a != arrays[0]
    if differ.any():
        acc = np.zeros(int(np.count_nonzero(differ)))
        for a, pw in zip(arrays, weights):
            acc += pw * np.log(a[differ])
        out[differ] = np.exp(acc)
    return out


def mix_lazy_steps(states, weights, start=None, *, out=None):
    """Mix PSA's per-weight step-size states (``LazyStepState``).

    The weights are averaged, the step sizes averaged geometrically (they
    adapt by factors), the update counter ``t`` summed as increments, and an
    adaptation window started at the mixed weights
    (``LazyStepState.set_weights``). If the next event ends that window, its
    ratio is the rule's ``x/0`` case: one factor in ``[psa_beta,
    psa_alpha]`` (at most a 1% change with the defaults).

    Only the state's public accessors are read (``t``, ``weights``,
    ``step_sizes``, ``set_weights``), on a deep copy of the first state.

    Parameters
    ----------
    states : sequence of LazyStepState
        One per model, each continued from ``start``.
    weights : sequence of float
        The models' shares of the rows.
    start : LazyStepState or None
        The state the models started from (None: a fresh start, ``t = 0``).
    out : LazyStepState or None, default=None
        The state to write the mix into, e.g. one of ``states`` that the
        caller owns and no longer needs (the threads of one fit: it saves a
        copy of the whole state). None: a deep copy of the first state.

    Returns
    -------
    mixed : LazyStepState
        ``out``, or a new state; the inputs other than ``out`` are not
        modified.
    """
    t = int(sum_increments([s.t for s in states], 0 if start is None else start.t))
    w = weighted_mean([s.weights for s in states], weights)
    eta = geometric_mean([s.step_sizes for s in states], weights)
    if out is None:
        out = copy.deepcopy(states[0])
    out.t = t
    out.set_weights(w, eta)
    return out
