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
              and p not in alg.params and not (alg.regularized and p in ("c1", "c2"))]
    if unused:
        takes = sorted(set(alg.params) | ({"c1", "c2"} if alg.regularized else set()))
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
    params = dict(alg.fixed)
    available = tagger.get_params()
    for name, value in (("fit_intercept", False), ("random_state", crf.random_state),
                        ("verbose", 0), ("n_jobs", crf.n_jobs)):
        if name in available:
            params[name] = value
    for ours, theirs in alg.params.items():
        if getattr(crf, ours) is not None:
            params[theirs] = getattr(crf, ours)
    if alg.regularized:
        c1 = _C1 if crf.c1 is None else float(crf.c1)
        c2 = _C2 if crf.c2 is None else float(crf.c2)
        params.update(penalty_params(alg.name, c1, c2, n_sequences, available))
    return params
