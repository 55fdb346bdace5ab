"""`CRF`'s arguments mapped to its tagger's: the checks that the chosen algorithm
honours each one, and the tagger parameters (CRFsuite's ``c1``/``c2`` as the
tagger's penalty)."""
from numbers import Integral, Real

import numpy as np

from .._threads import check_n_jobs
from ._registry import TRAINER_PARAMS, penalty_params

#: CRFsuite's defaults of the regularisation (lbfgs, l2sgd).
_C1, _C2 = 0.0, 1.0


def tagger_params(crf, alg, tagger, n_sequences):
    """The parameters of ``tagger`` (the class of ``alg``) for the arguments of
    ``crf``, after checking that ``alg`` can honour every one of them."""
    if crf.trainer_cls is not None:
        raise ValueError("trainer_cls is sklearn-crfsuite's pycrfsuite.Trainer hook; "
                         "this CRF trains with its own taggers: leave it None and "
                         "choose `algorithm`.")
    unused = [p for p in TRAINER_PARAMS if getattr(crf, p) is not None
              and p not in alg.takes() and not (alg.regularized and p in ("c1", "c2"))]
    if unused:
        takes = sorted(alg.takes() | ({"c1", "c2"} if alg.regularized else set()))
        raise ValueError(f"algorithm={alg.name!r} does not use {', '.join(unused)}; "
                         f"it takes {', '.join(takes)}.")
    for name in ("c1", "c2", "min_freq"):
        v = getattr(crf, name)
        if v is not None and not (isinstance(v, Real) and np.isfinite(v)
                                  and (v >= 0 or name == "min_freq")):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}.")
    if alg.features == "tagger" and crf.min_freq:
        raise ValueError(f"algorithm={alg.name!r} generates CRFsuite's features itself, "
                         f"without a frequency cut-off: min_freq={crf.min_freq!r} cannot "
                         "be honoured (leave it None or 0).")
    if alg.features == "all":
        explicit = [f"{p}=False" for p in ("all_possible_states", "all_possible_transitions")
                    if getattr(crf, p) is not None and not getattr(crf, p)]
        if crf.min_freq:
            explicit.append(f"min_freq={crf.min_freq!r}")
        if explicit:
            raise ValueError(
                f"algorithm={alg.name!r} trains every (attribute, label) pair and "
                f"transition: {', '.join(explicit)} cannot be honoured (leave them None, "
                "or choose an algorithm that generates CRFsuite's features).")
    # every algorithm takes n_jobs (threads on one model: _threads.py)
    check_n_jobs(crf.n_jobs)
    if crf.max_iterations is not None and not (
            isinstance(crf.max_iterations, Integral) and crf.max_iterations >= 1):
        raise ValueError(f"max_iterations must be an int >= 1, got {crf.max_iterations!r}.")
    stopping_rule(crf, alg)
    calibration_params(crf, alg)
    params = dict(alg.fixed)
    available = tagger.get_params()
    for name, value in (("fit_intercept", False), ("random_state", crf.random_state),
                        ("verbose", 0), ("n_jobs", crf.n_jobs)):
        if name in available:
            params[name] = value
    for ours, theirs in alg.params.items():
        value = getattr(crf, ours)
        if value is None:
            value = alg.defaults.get(ours)
        if value is not None:
            params[theirs] = value
    if alg.regularized:
        c1 = _C1 if crf.c1 is None else float(crf.c1)
        c2 = _C2 if crf.c2 is None else float(crf.c2)
        params.update(penalty_params(alg.name, c1, c2, n_sequences, available))
    return params


def stopping_rule(crf, alg):
    """``(period, delta)`` of CRFsuite's l2sgd rule for ``crf`` (the defaults
    of ``alg.stopping`` where None), or None when ``alg`` has no such rule."""
    if not alg.stopping:
        return None
    period = alg.stopping["period"] if crf.period is None else crf.period
    delta = alg.stopping["delta"] if crf.delta is None else crf.delta
    if isinstance(period, bool) or not isinstance(period, Integral) or period < 1:
        raise ValueError(f"period must be an int >= 1, got {period!r}.")
    if isinstance(delta, bool) or not isinstance(delta, Real) or not delta >= 0:
        raise ValueError(f"delta must be a number >= 0, got {delta!r}.")
    return int(period), float(delta)


def calibration_params(crf, alg):
    """The keywords of ``calibrate_crf_eta0`` for CRFsuite's ``calibration_*``
    arguments of ``crf`` (CRFsuite's defaults where None); {} when ``alg``
    has no calibration."""
    out = {}
    for name, (key, default) in alg.calibration.items():
        value = getattr(crf, name)
        value = default if value is None else value
        if key in ("n_samples", "max_trials"):
            ok = not isinstance(value, bool) and isinstance(value, Real) and value >= 1 \
                and float(value).is_integer()
            value = int(value) if ok else value
        elif key == "factor":
            ok = isinstance(value, Real) and np.isfinite(value) and value > 1
        else:
            ok = isinstance(value, Real) and np.isfinite(value) and value > 0
        if isinstance(value, bool) or not ok:
            what = {"n_samples": "an int >= 1", "max_trials": "an int >= 1",
                    "factor": "a finite number > 1"}.get(key, "a finite number > 0")
            raise ValueError(f"{name} must be {what}, got {value!r}.")
        out[key] = value
    return out
