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
from importlib.metadata import PackageNotFoundError, version

from .linear import PlainSGDClassifier, PSAClassifier, SBMLogisticRegression, SGDQNLinearSVC
from .sequence import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    LBFGSSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PSASequenceTagger,
    SGDSequenceTagger,
)

try:
    __version__ = version("sklearn-secondorder")
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["PSAClassifier", "PlainSGDClassifier", "SGDQNLinearSVC", "SBMLogisticRegression",
           "ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger",
           "LBFGSSequenceTagger", "AveragedPerceptronSequenceTagger",
           "PassiveAggressiveSequenceTagger", "AROWSequenceTagger"]
