"""Sequence taggers: linear-chain CRFs on the shared Cython core."""
from ._arow import AROWSequenceTagger
from ._asf import ASFSequenceTagger
from ._lbfgs import LBFGSSequenceTagger
from ._passive_aggressive import PassiveAggressiveSequenceTagger
from ._perceptron import AveragedPerceptronSequenceTagger
from ._psa import PSASequenceTagger
from ._sgd import SGDSequenceTagger

__all__ = ["ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger",
           "LBFGSSequenceTagger", "AveragedPerceptronSequenceTagger",
           "PassiveAggressiveSequenceTagger", "AROWSequenceTagger"]
