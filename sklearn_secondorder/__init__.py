"""Single-pass second-order SGD estimators for scikit-learn.

Linear classifiers (dense or CSR input)
---------------------------------------
PSAClassifier
    Periodic Step-size Adaptation (Hsu et al., Algorithm 1).
SGDQNLinearSVC
    SGD-QN, the corrected quasi-Newton SGD for linear SVMs (Bordes et al.).
SBMLogisticRegression
    Stochastic bound majorization, full and low rank (Choromanska & Jebara).
PlainSGDClassifier
    Plain / averaged SGD on the same core (the baseline).

Linear regressors (dense or CSR input, features on any scale)
-------------------------------------------------------------
PSARegressor
    PSA for regression: SGDRegressor's losses, one pass.
PlainSGDRegressor
    Plain / averaged SGD for regression (SGDRegressor's schedules).

Sequence taggers (linear-chain CRFs, sklearn-crfsuite's input)
--------------------------------------------------------------
ASFSequenceTagger
    Averaged SGD with feedback (Sun et al.), optionally with latent states.
PSASequenceTagger
    PSA on the CRF core.
SGDSequenceTagger
    Plain / averaged SGD on the CRF core (the baseline).
LBFGSSequenceTagger, AveragedPerceptronSequenceTagger,
PassiveAggressiveSequenceTagger, AROWSequenceTagger
    CRFsuite's trainers (lbfgs with OWL-QN, ap, pa, arow) on the CRF core.

``sklearn_secondorder.metrics`` has conlleval chunk F1 and scorers.
"""
import importlib
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sklearn-secondorder")
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    __version__ = "0+unknown"

# The estimators are imported on first use (PEP 562): importing them loads
# scikit-learn (seconds on a busy machine), and the command line checks its
# arguments before paying for that.
_HOMES = {
    "PSAClassifier": "linear", "PlainSGDClassifier": "linear", "SGDQNLinearSVC": "linear",
    "SBMLogisticRegression": "linear", "PSARegressor": "linear", "PlainSGDRegressor": "linear",
    "ASFSequenceTagger": "sequence", "PSASequenceTagger": "sequence",
    "SGDSequenceTagger": "sequence", "LBFGSSequenceTagger": "sequence",
    "AveragedPerceptronSequenceTagger": "sequence",
    "PassiveAggressiveSequenceTagger": "sequence", "AROWSequenceTagger": "sequence",
}

_SUBPACKAGES = ("linear", "sequence", "metrics", "crfsuite", "cli", "dask")

__all__ = ["PSAClassifier", "PlainSGDClassifier", "SGDQNLinearSVC", "SBMLogisticRegression",
           "PSARegressor", "PlainSGDRegressor",
           "ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger",
           "LBFGSSequenceTagger", "AveragedPerceptronSequenceTagger",
           "PassiveAggressiveSequenceTagger", "AROWSequenceTagger"]


def __getattr__(name):
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:       # (as before: `sklearn_secondorder.linear` without its import)
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
