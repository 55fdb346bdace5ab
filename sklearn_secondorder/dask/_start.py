"""The start of a ``ParameterMixing`` fit: ``'auto'`` settings resolved on the
first rows, and a tagger's zero start over the shared vocabulary (built on
the client, no data needed).
"""
import warnings

from sklearn.base import clone, is_regressor

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
            if is_regressor(tmp):
                tmp.partial_fit(X, y, sample_weight=sw)
            else:
                tmp.partial_fit(X, y, classes=classes, sample_weight=sw)
    return rule.resolve(tmp, n_rows)


def _start_regressor(model, part, n_head):
    """A regressor's start on the first ``n_head`` rows of a partition
    (``start_model``: its centring and step sizes, zero weights), on that
    partition's worker."""
    X, y, sw = _linear_batch([tuple(a[:n_head] for a in part)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return model.start_model(X, y, sample_weight=sw)



# ---- starts built on the client (no data needed) ------------------------------------
def _start_tagger(model, summaries, classes):
    """A tagger with zero weights over the shared vocabulary (the attributes in
    order of first appearance over the partitions), as its ``fit`` would set up
    (``start_model``)."""
    kinds = {s["kind"] for s in summaries if s["kind"] is not None}
    if len(kinds) != 1:
        raise ValueError("the bag mixes sentences of feature dicts and of arrays.")
    if kinds.pop() == KIND_DICTS:
        vocabulary = {}
        for s in summaries:
            for a in s["attrs"]:
                vocabulary.setdefault(a, len(vocabulary))
        return model.start_model(classes, vocabulary=vocabulary)
    n_features = next(s["n_features"] for s in summaries if s["n_features"] is not None)
    return model.start_model(classes, n_features=n_features)
