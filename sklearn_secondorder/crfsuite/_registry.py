"""The ``algorithm`` registry of `sklearn_secondorder.crfsuite.CRF`.

One entry per algorithm name: the tagger class that trains it and how the
facade's (CRFsuite's) parameters map onto the tagger's. Adding a trainer is
one ``register_algorithm(Algorithm(...))`` call; an algorithm whose tagger
cannot be imported yet is not offered (the error lists those that are).
"""
from dataclasses import dataclass, field
from importlib import import_module

#: CRFsuite's trainer parameters, as sklearn-crfsuite names them (the facade's
#: arguments); ``None`` means "not given" (the algorithm's default).
TRAINER_PARAMS = (
    "c1", "c2", "max_iterations", "num_memories", "epsilon", "period", "delta",
    "linesearch", "max_linesearch", "calibration_eta", "calibration_rate",
    "calibration_samples", "calibration_candidates", "calibration_max_trials", "pa_type",
    "c", "error_sensitive", "averaging", "variance", "gamma",
)


@dataclass(frozen=True)
class Algorithm:
    """How one ``algorithm`` name is trained.

    Attributes
    ----------
    name : str
        The ``algorithm`` value.
    tagger : str
        ``"module:Class"`` of the sequence tagger (imported when used, so an
        entry may name a tagger that another branch adds).
    params : dict
        The facade parameters it takes (CRFsuite's names) -> the tagger
        parameter of the same meaning. A facade parameter given (not None)
        that is not here, nor ``c1`` / ``c2`` of a regularised algorithm, is
        an error: no parameter is silently ignored.
    regularized : bool
        Whether the objective is CRFsuite's
        ``-sum log p + c1 ||w||_1 + c2 ||w||^2``: ``c1`` and ``c2`` then map
        onto the tagger's ``alpha`` (and ``penalty`` / ``l1_ratio``), see
        `penalty_params`.
    fixed : dict
        Tagger parameters this algorithm fixes (e.g. ``average=False``).
    per_pass : bool
        Whether the facade may train pass by pass (``_run_passes(ds, 1)``
        ``max_iterations`` times, the state carried between calls), which
        gives one ``training_log_`` record per pass and the dev scores. A
        trainer whose state does not survive between calls (e.g. a batch
        optimiser's memory) sets it False: one call, one record.
    features : {'mask', 'tagger', 'all'}
        Who generates CRFsuite's features. ``'mask'``: the facade, as the
        mask of the weights that exist (``min_freq``, ``all_possible_*``),
        given to the trainer's gradient sink (``CRFContext.add_gradient``,
        ``CRFState.allowed``). ``'tagger'``: the tagger itself, from its
        ``all_possible_states`` / ``all_possible_transitions`` parameters
        (``sequence._feature_set``; ``min_freq`` > 0 is then a ValueError).
        ``'all'``: every (attribute, label) pair and transition exists (a
        trainer that takes no mask); ``min_freq`` or an explicit
        ``all_possible_*=False`` is a ValueError.
    defaults : dict
        CRFsuite's default of a facade parameter where it differs from the
        tagger's own (``max_iterations`` of 'lbfgs' and 'l2sgd'): a facade
        parameter left None takes it, so ``CRF(algorithm=name)`` trains as
        CRFsuite's trainer of that name does.
    stopping : dict
        Facade parameters the facade itself honours between passes (CRFsuite's
        l2sgd rule: ``period``, ``delta``), with their CRFsuite defaults; the
        pass-by-pass training stops by that rule and keeps the pass of the
        lowest objective, as CRFsuite's l2sgd does (``_estimator``).
    calibration : dict
        CRFsuite's step-size calibration parameters the tagger's ``eta0='auto'``
        takes (``calibration_eta`` ...), facade name -> (keyword of
        ``calibrate_crf_eta0``, CRFsuite's default).
    summary : str
        One line for the error message and the docs.
    """

    name: str
    tagger: str
    params: dict = field(default_factory=dict)
    regularized: bool = True
    fixed: dict = field(default_factory=dict)
    per_pass: bool = True
    features: str = "mask"
    defaults: dict = field(default_factory=dict)
    stopping: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)
    summary: str = ""

    def takes(self):
        """The facade parameters this algorithm honours (besides ``c1``, ``c2``)."""
        return set(self.params) | set(self.stopping) | set(self.calibration)

    def tagger_class(self):
        """The tagger class, or None when it cannot be imported (not there yet)."""
        module, _, cls = self.tagger.partition(":")
        try:
            return getattr(import_module(module), cls)
        except (ImportError, AttributeError):
            return None


ALGORITHMS = {}


def register_algorithm(algorithm):
    """Add (or replace) an ``algorithm`` entry of `sklearn_secondorder.crfsuite.CRF`.

    Parameters
    ----------
    algorithm : Algorithm
        The entry.

    Returns
    -------
    algorithm : Algorithm
        The entry, registered.
    """
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def available_algorithms():
    """The registered algorithm names whose tagger can be imported.

    Returns
    -------
    names : list of str
        Sorted.
    """
    return sorted(name for name, alg in ALGORITHMS.items() if alg.tagger_class() is not None)


def get_algorithm(name):
    """The registry entry and tagger class of ``name``; a clear error otherwise."""
    alg = ALGORITHMS.get(name)
    cls = alg.tagger_class() if alg is not None else None
    if cls is None:
        known = ", ".join(repr(a) for a in available_algorithms())
        what = "is not available" if alg else "is unknown"
        raise ValueError(f"algorithm={name!r} {what}; the available algorithms are {known}.")
    return alg, cls


def penalty_params(name, c1, c2, n_sequences, tagger_params):
    """CRFsuite's ``c1``, ``c2`` as the tagger's ``alpha`` / ``penalty`` / ``l1_ratio``.

    CRFsuite minimises ``-sum_i log p(y_i|x_i) + c1 ||w||_1 + c2 ||w||^2``;
    the taggers minimise ``mean_i -log p(y_i|x_i) + alpha (l1_ratio ||w||_1 +
    (1 - l1_ratio) / 2 ||w||^2)`` (scikit-learn's elastic net). Dividing
    CRFsuite's objective by ``n`` gives the same minimiser exactly with
    ``alpha = (c1 + 2 c2) / n`` and ``l1_ratio = c1 / (c1 + 2 c2)``.

    Parameters
    ----------
    name : str
        The algorithm (for the error message).
    c1, c2 : float
        CRFsuite's L1 and L2 coefficients.
    n_sequences : int
        ``n``, the number of training sequences.
    tagger_params : dict
        The tagger's ``get_params()``: L1 needs a ``penalty`` parameter.

    Returns
    -------
    params : dict
        ``alpha``, and ``penalty`` / ``l1_ratio`` when the tagger has them.
    """
    total = c1 + 2.0 * c2
    out = {"alpha": total / n_sequences}
    has_penalty = "penalty" in tagger_params
    if c1 > 0:
        if not has_penalty:
            with_l1 = [a for a in available_algorithms() if ALGORITHMS[a].regularized
                       and "penalty" in ALGORITHMS[a].tagger_class()().get_params()]
            raise ValueError(
                f"c1={c1!r}: L1 regularization is not yet available for algorithm={name!r} "
                "(its tagger has no `penalty` parameter); use c1=0 (L2 only, c2)"
                + (f", or an algorithm with L1: {', '.join(map(repr, with_l1))}."
                   if with_l1 else "."))
        out.update(penalty="elasticnet", l1_ratio=c1 / total)
    elif has_penalty:
        out.update(penalty="l2")
        if "l1_ratio" in tagger_params:
            out.update(l1_ratio=0.0)
    return out


#: The passes of 'asf' when ``max_iterations`` is None: CRF()'s default
#: (the end of ASF's 7th period; chosen on four sets, see CRF's docstring)
ASF_PASSES = 28

register_algorithm(Algorithm(
    name="asf", tagger="sklearn_secondorder.sequence:ASFSequenceTagger",
    params={"max_iterations": "max_iter"}, defaults={"max_iterations": ASF_PASSES},
    summary=f"averaged SGD with feedback (Sun et al. 2010); max_iterations passes, "
            f"{ASF_PASSES} by default"))
register_algorithm(Algorithm(
    name="psa", tagger="sklearn_secondorder.sequence:PSASequenceTagger",
    params={"max_iterations": "max_iter"},
    summary="periodic step-size adaptation (Hsu et al. 2009); one pass by default"))
#: CRFsuite's largest ``max_iterations`` (its lbfgs default, C's INT_MAX): no
#: limit, the stopping rule ends the training
INT_MAX = 2 ** 31 - 1

register_algorithm(Algorithm(
    name="l2sgd", tagger="sklearn_secondorder.sequence:SGDSequenceTagger",
    params={"max_iterations": "max_iter"}, fixed={"average": False},
    defaults={"max_iterations": 1000},
    stopping={"period": 10, "delta": 1e-6},
    calibration={"calibration_eta": ("eta_start", 0.1), "calibration_rate": ("factor", 2.0),
                 "calibration_samples": ("n_samples", 1000),
                 "calibration_max_trials": ("max_trials", 20)},
    summary="CRFsuite's l2sgd: SGD with eta = 1 / (alpha (t0 + t)), t0 from a calibrated "
            "eta0 (Bottou); up to max_iterations passes (1000), stopping when the objective "
            "improved by less than delta (1e-6) over period (10) passes"))

# CRFsuite's own trainers: the taggers generate CRFsuite's features
# themselves and run all their iterations in one call (one log record)
_CRFSUITE_FEATURES = {"all_possible_states": "all_possible_states",
                      "all_possible_transitions": "all_possible_transitions"}
register_algorithm(Algorithm(
    name="lbfgs", tagger="sklearn_secondorder.sequence:LBFGSSequenceTagger",
    params={"max_iterations": "max_iter", "num_memories": "num_memories",
            "epsilon": "epsilon", "period": "period", "delta": "delta",
            "linesearch": "linesearch", "max_linesearch": "max_linesearch",
            **_CRFSUITE_FEATURES},
    features="tagger", per_pass=False, defaults={"max_iterations": INT_MAX},
    summary="CRFsuite's lbfgs: L-BFGS, OWL-QN when c1 > 0; no iteration limit by default "
            "(CRFsuite's), stopping by epsilon / period / delta"))
register_algorithm(Algorithm(
    name="ap", tagger="sklearn_secondorder.sequence:AveragedPerceptronSequenceTagger",
    params={"max_iterations": "max_iter", "epsilon": "epsilon", **_CRFSUITE_FEATURES},
    regularized=False, features="tagger", per_pass=False,
    summary="CRFsuite's ap: averaged perceptron"))
register_algorithm(Algorithm(
    name="pa", tagger="sklearn_secondorder.sequence:PassiveAggressiveSequenceTagger",
    params={"max_iterations": "max_iter", "epsilon": "epsilon", "pa_type": "pa_type",
            "c": "c", "error_sensitive": "error_sensitive", "averaging": "averaging",
            **_CRFSUITE_FEATURES},
    regularized=False, features="tagger", per_pass=False,
    summary="CRFsuite's pa: passive-aggressive (PA, PA-I, PA-II)"))
register_algorithm(Algorithm(
    name="arow", tagger="sklearn_secondorder.sequence:AROWSequenceTagger",
    params={"max_iterations": "max_iter", "epsilon": "epsilon", "variance": "variance",
            "gamma": "gamma", **_CRFSUITE_FEATURES},
    regularized=False, features="tagger", per_pass=False,
    summary="CRFsuite's arow: adaptive regularization of weight vectors"))
