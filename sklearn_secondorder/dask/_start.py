"""The start of a ``ParameterMixing`` fit: ``'auto'`` settings resolved on the
first rows, and a tagger's zero start over the shared vocabulary (built on
the client, no data needed).
"""
import warnings

from sklearn.base import clone
from sklearn.utils import check_random_state

from .._validation import check_eta0
from ..sequence._input import KIND_DICTS
from ._rules import _rule_for
from ._transport import _linear_batch, _tagger_batch


# ---- 'auto' settings, resolved on a worker ------------------------------------------
def _resolve_auto(model, part, classes, tagger, n_head, n_rows):
    """Fit a copy on the first ``n_head`` rows of a partition; the concrete values
    of its ``'auto'`` settings."""
    rule = _rule_for(model)
    tmp = clone(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if tagger:
            X, y = _tagger_batch([part[:n_head]])
            tmp.partial_fit(X, y, classes=classes)
        else:
            X, y, sw = _linear_batch([tuple(a[:n_head] for a in part)])
            tmp.partial_fit(X, y, classes=classes, sample_weight=sw)
    return rule.resolve(tmp, n_rows)



# ---- starts built on the client (no data needed) ------------------------------------
def _start_tagger(model, summaries, classes):
    """A tagger with zero weights over the shared vocabulary (the attributes in
    order of first appearance over the partitions), as its ``fit`` would set up."""
    kinds = {s["kind"] for s in summaries if s["kind"] is not None}
    if len(kinds) != 1:
        raise ValueError("the bag mixes sentences of feature dicts and of arrays.")
    kind = kinds.pop()
    model._validate_params()
    model._more_validate_params()
    model.classes_ = model._check_labels(classes)
    model._kind = kind
    if kind == KIND_DICTS:
        vocabulary = {}
        for s in summaries:
            for a in s["attrs"]:
                vocabulary.setdefault(a, len(vocabulary))
        model.vocabulary_ = vocabulary
        n_attributes = len(vocabulary)
    else:
        n_attributes = next(s["n_features"] for s in summaries if s["n_features"] is not None)
        model.n_features_in_ = n_attributes
    model._new_state(n_attributes, check_random_state(model.random_state))
    if model.eta0 == "auto":  # (resolved before unless the caller set it)
        raise ValueError("eta0='auto' must be resolved before the start is built.")
    if model.eta0 is not None:   # (the perceptron-like trainers take no step size)
        model.eta0_ = float(model.eta0)
        check_eta0(model, model.eta0_)   # (the workers run the tagger's core)
    model.t_ = 0
    model.n_iter_ = 0
    model._model = model._final_flat()
    return model
