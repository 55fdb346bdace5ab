"""Sequence taggers: linear-chain CRFs on the shared Cython core."""
from ._asf import ASFSequenceTagger
from ._lbfgs import LBFGSSequenceTagger
from ._online import (
    AROWSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
)
from ._psa import PSASequenceTagger
from ._sgd import SGDSequenceTagger

__all__ = ["ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger",
           "LBFGSSequenceTagger", "AveragedPerceptronSequenceTagger",
           "PassiveAggressiveSequenceTagger", "AROWSequenceTagger"]
