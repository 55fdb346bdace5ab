"""`sklearn_secondorder.crfsuite.CRF`: sklearn-crfsuite's ``CRF`` on this package's trainers."""
import os

import numpy as np
from sklearn.base import BaseEstimator

from .._validation import store_init_params
from ..metrics import flat_accuracy_score
from ..sequence._input import KIND_DICTS, read_sequences
from ._features import deployed_model, feature_mask
from ._log import TrainingLog, dev_set, pass_recorder
from ._model import CRFModel, Tagger
from ._params import _C1, _C2, calibration_params, stopping_rule, tagger_params
from ._registry import get_algorithm

#: The algorithm used when ``algorithm`` is None (see the class docstring).
DEFAULT_ALGORITHM = "asf"


def _model_property(read, doc):
    """A read-only property of ``CRF``: ``read(model)`` of the fitted model,
    None before ``fit``."""
    def get(self):
        model = self._model
        return None if model is None else read(model)
    return property(get, doc=doc)


class CRF(BaseEstimator):
    """A linear-chain CRF with sklearn-crfsuite's API on this package's trainers.

    ``from sklearn_secondorder.crfsuite import CRF`` takes every argument of
    ``sklearn_crfsuite.CRF`` (same names and defaults; None is "the
    algorithm's default", as there), the same input (every form of
    ``pycrfsuite.ItemSequence``, with CRFsuite's attribute names: ``{"w":
    "x"}`` is attribute ``w:x``), and gives the same fitted attributes and
    methods: ``fit(X, y, X_dev, y_dev)``, ``predict``, ``predict_single``,
    ``predict_marginals``, ``predict_marginals_single``, ``score``,
    ``classes_``, ``attributes_``, ``state_features_``,
    ``transition_features_``, ``training_log_``, ``size_``,
    ``num_attributes_``, ``tagger_`` (None before ``fit``).

    The model is CRFsuite's linear-chain CRF (state features and label
    transitions, no bias), with CRFsuite's feature generation: a state
    feature exists only for an (attribute, label) pair seen in training and
    a transition only for a label bigram seen, unless
    ``all_possible_states`` / ``all_possible_transitions``; features rarer
    than ``min_freq`` are dropped. The gradient of the weights that do not
    exist is never applied (``CRFContext.set_allowed``), so they stay zero.

    The objective is CRFsuite's, ``-sum_i log p(y_i | x_i) + c1 ||w||_1 +
    c2 ||w||^2``, given to the taggers exactly as ``alpha = (c1 + 2 c2) / n``
    and ``l1_ratio = c1 / (c1 + 2 c2)`` (``n`` training sequences).

    Parameters
    ----------
    algorithm : {'asf', 'psa', 'l2sgd', 'lbfgs', 'ap', 'pa', 'arow'} or None, \
default=None
        The trainer (the registry ``ALGORITHMS``; see
        ``available_algorithms()``; an unknown name is a ValueError that lists
        them): ``'asf'`` (`ASFSequenceTagger`, averaged SGD with feedback),
        ``'psa'`` (`PSASequenceTagger`, one pass by default; an attribute
        holds the weights of its trained labels only, in a record as wide
        as they are), ``'l2sgd'`` (`SGDSequenceTagger`,
        CRFsuite's l2sgd schedule), and CRFsuite's own trainers ``'lbfgs'``
        (`LBFGSSequenceTagger`, OWL-QN when ``c1 > 0``), ``'ap'``, ``'pa'``,
        ``'arow'`` (they generate the features themselves, without
        ``min_freq``, and run in one call: one ``training_log_`` record).
        None is ``'asf'`` for 28 passes (``max_iterations=None``), chosen on
        four sets with CRFsuite's defaults (``c1=0``, ``c2=1``) against
        sklearn-crfsuite's ``CRF()`` (L-BFGS to CRFsuite's stopping rule),
        in one run of ``benchmarks/bench_crfsuite.py``
        (``benchmarks/RESULTS.md``): CoNLL-2000 chunking and base NP with the
        tutorial's features, CoNLL-2003 English NER (testb) and BC2GM gene
        mentions with a generic NER template. Test F1 after 28 passes with
        ``random_state`` 0 / 1 / 2, sklearn-crfsuite's in brackets: chunking
        92.94 / 92.94 / 92.86 (92.92), base NP 92.97 / 92.88 / 93.01
        (92.89), CoNLL-2003 81.66 / 81.45 / 81.48 (81.43), BC2GM 71.70 /
        71.49 / 71.76 (71.30); ``fit`` in 0.19x, 0.15x, 0.19x, 0.03x of its
        wall time (0.10x, 0.10x, 0.18x, 0.05x of its CPU time), input
        conversion included. 28 passes is the end of ASF's 7th period (the
        model a whole period's average); after 10 passes BC2GM is 0.4-0.5
        short (70.76-70.88), and from pass 25 to 40 CoNLL-2003 varies
        between 81.03 and 81.85 with the pass and the shuffle. ``'lbfgs'``
        gives sklearn-crfsuite's own model (within 0.04 F1 on the four) in
        0.46x-1.10x of its wall time; one pass of PSA
        (``PSASequenceTagger()``) is faster still but 0.7-1.9 F1 short;
        ``'ap'`` and ``'pa'`` take no ``c1`` / ``c2`` (not a likelihood).
    min_freq : float, default=None
        Drop the features whose frequency (the sum of the attribute's values
        over the tokens of the label; for a transition the number of
        bigrams) is below ``min_freq``. None is 0 (no cut-off).
    all_possible_states : bool, default=None
        Generate a state feature for every (attribute, label) pair, not only
        those seen in training. None is False.
    all_possible_transitions : bool, default=None
        Generate every label-bigram transition feature, not only those seen
        in training. None is False.
    c1 : float, default=None
        L1 coefficient (CRFsuite's objective). None is 0. L1 needs a tagger
        with a ``penalty`` parameter ('lbfgs' has it); for the others
        ``c1 > 0`` is a ValueError until they take it.
    c2 : float, default=None
        L2 coefficient (CRFsuite's objective). None is 1.
    max_iterations : int, default=None
        Passes (iterations for 'lbfgs') over the training data. None is the
        algorithm's default, CRFsuite's where CRFsuite has the algorithm:
        'lbfgs' has no limit (CRFsuite's ``INT_MAX``: its ``epsilon`` /
        ``period`` / ``delta`` rule stops it), 'l2sgd' at most 1000 (its
        ``period`` / ``delta`` rule stops it), 'ap', 'pa', 'arow' 100; 'asf'
        28 (``CRF()``'s default, see ``algorithm``) and 'psa' 1 (this
        package's trainers).
    num_memories, epsilon, period, delta, linesearch, max_linesearch : default=None
        CRFsuite's L-BFGS parameters ('lbfgs', CRFsuite's defaults 6, 1e-5,
        10, 1e-5, 'MoreThuente', 20; ``epsilon`` also 'ap', 'pa', 'arow',
        default 0). 'l2sgd' takes ``period`` and ``delta`` (defaults 10 and
        1e-6), CRFsuite's stopping rule: stop after the first pass whose
        objective improved by less than ``delta`` (relative) on the one
        ``period`` passes before, and keep the weights of the pass with the
        lowest objective. Giving one to an algorithm that does not take it
        is a ValueError, never silently ignored.
    calibration_eta, calibration_rate, calibration_samples : default=None
        CRFsuite's l2sgd step-size calibration ('l2sgd'): the first step
        tried (0.1), the factor between candidates (2), the sequences of the
        sample (1000); the trials each way are ``calibration_max_trials``.
        The search walks while the objective after a trial pass improves and
        halves the best step (Bottou's recipe).
    calibration_candidates : None, default=None
        CRFsuite's number of steps tried each way; the search above walks
        while the objective improves instead, so anything but None is a
        ValueError.
    calibration_max_trials : int, default=None
        The trials each way of the calibration above ('l2sgd'); None is 20.
    pa_type, c, error_sensitive, averaging, variance, gamma : default=None
        CRFsuite's PA ('pa') and AROW ('arow') parameters; a ValueError when
        given to another algorithm.
    verbose : bool, default=False
        Print one line per pass (pass, seconds, loss, non-zero weights, and
        the dev scores with a dev set), as sklearn-crfsuite.
    model_filename : str, default=None
        ``fit`` writes the model there; an unfitted ``CRF(model_filename=path)``
        loads it (this package's ``.npz`` model files, or a CRFsuite model
        file when python-crfsuite is installed).
    keep_tempfiles : bool, default=False
        Accepted for sklearn-crfsuite's signature; no temporary files are
        made (the model is kept in memory).
    trainer_cls : None, default=None
        The pycrfsuite ``Trainer`` subclass hook of sklearn-crfsuite; there is no
        pycrfsuite trainer here, so anything but None is a ValueError.
    random_state : int, RandomState instance or None, default=0
        Seeds the shuffles and the step-size calibration (deterministic by
        default, as CRFsuite).
    keep_training_state : bool, default=False
        Keep the trained tagger (``estimator_``, with its training state) in
        the fitted model and its pickle; by default only the deployed model
        is kept, the size of CRFsuite's model.
    n_jobs : int, default=None
        Threads that train the one model together (not in sklearn-crfsuite:
        CRFsuite trains on one thread). 'lbfgs' splits every evaluation of
        the objective and gradient over the sequences (`LBFGSSequenceTagger`'s
        ``n_jobs``): None is 1, -1 all the cores, -2 all but one; a given
        value always gives the same model, and different values agree to
        about 1e-12 relative per evaluation. 'asf' and 'psa' share every
        pass on the one model: each thread owns a share of the weight rows,
        and the sequences go by in short rounds, each inferred at the
        weights of its round's start (the tagger's ``n_jobs``); 'l2sgd',
        'ap', 'pa' and 'arow' train a copy of the model per thread on its
        share of the pass's sequences and average the copies after the pass
        (parameter mixing). Neither is the one-thread model: on CoNLL-2000 chunking the
        chunk F1 after the same passes at 2 threads is within a tenth of one
        thread's for the shared passes, a few tenths lower for the mixed
        ones (see the user guide). A given value always gives the same
        model. 0 or a non-int is a ValueError.

    Attributes
    ----------
    classes_ : list of str
        The labels, in the order of their first appearance in training (as
        CRFsuite's); None before ``fit``.
    attributes_ : list of str
        The attributes with a non-zero weight; None before ``fit``.
    state_features_ : dict
        ``{(attribute, label): weight}``, non-zero weights; None before ``fit``.
    transition_features_ : dict
        ``{(label_from, label_to): weight}``, non-zero weights; None before ``fit``.
    training_log_ : TrainingLog
        One record per pass; None before ``fit``.
    size_ : int
        The size of the model file, in bytes; None before ``fit``.
    num_attributes_ : int
        The number of attributes with a non-zero weight; None before ``fit``.
    tagger_ : Tagger
        pycrfsuite's ``Tagger`` interface on the model; None before ``fit``.
    estimator_ : sequence tagger
        The trained tagger (only with ``keep_training_state=True``).

    See Also
    --------
    ASFSequenceTagger : The default trainer, with scikit-learn's names.
    sklearn_crfsuite.CRF : The CRFsuite-based original.

    Examples
    --------
    >>> from sklearn_secondorder.crfsuite import CRF
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> crf = CRF(c2=0.01).fit(X, y)
    >>> crf.predict_single([{"w": "a"}, {"w": "dog"}])
    ['DET', 'N']
    >>> sorted(crf.attributes_)
    ['w:a', 'w:cat', 'w:dog', 'w:the']
    """

    def __init__(self, algorithm=None, min_freq=None, all_possible_states=None,
                 all_possible_transitions=None, c1=None, c2=None, max_iterations=None,
                 num_memories=None, epsilon=None, period=None, delta=None, linesearch=None,
                 max_linesearch=None, calibration_eta=None, calibration_rate=None,
                 calibration_samples=None, calibration_candidates=None,
                 calibration_max_trials=None, pa_type=None, c=None, error_sensitive=None,
                 averaging=None, variance=None, gamma=None, verbose=False,
                 model_filename=None, keep_tempfiles=False, trainer_cls=None,
                 random_state=0, keep_training_state=False, n_jobs=None):
        store_init_params(self, locals())

    # ---- fitting ------------------------------------------------------------------
    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train the CRF on ``X``, ``y`` (a dev set is evaluated after every pass).

        Parameters
        ----------
        X : list of sequences
            Each sequence a list of tokens in pycrfsuite's forms (feature
            dicts, lists of attribute names) or a ``pycrfsuite.ItemSequence``.
        y : list of lists of str
            The labels of every sequence.
        X_dev : list of sequences, default=None
            A dev set, scored after every pass (``training_log_``).
        y_dev : list of lists of str, default=None
            Its labels; given with ``X_dev`` or not at all.

        Returns
        -------
        self : CRF
            The fitted estimator.
        """
        if (X_dev is None) != (y_dev is None):
            raise ValueError("Pass both X_dev and y_dev to use the holdout data")
        name = DEFAULT_ALGORITHM if self.algorithm is None else self.algorithm
        alg, cls = get_algorithm(name)
        tagger = cls()
        tagger_params(self, alg, tagger, 1)      # (the checks, before reading the data)
        batch = read_sequences(tagger, X, y, fitting=True, first=True)
        if batch.kind != KIND_DICTS:
            raise TypeError("CRF takes pycrfsuite's input: a list of sequences, each a list "
                            "of feature dicts (or lists of attribute names); use the "
                            "sequence taggers for numeric arrays.")
        bad = next((lab for lab in batch.labels if not isinstance(lab, str)), None)
        if bad is not None:
            raise TypeError(f"labels must be str (CRFsuite's), got {bad!r} of type "
                            f"{type(bad).__name__}.")
        tagger.set_params(**tagger_params(self, alg, tagger, batch.n_sequences))
        classes = np.unique(batch.labels)
        label_idx = np.searchsorted(classes, batch.labels).astype(np.int32)
        if alg.features == "mask":
            mask = feature_mask(batch, label_idx, classes.size,
                                min_freq=float(self.min_freq or 0.0),
                                all_states=bool(self.all_possible_states),
                                all_transitions=bool(self.all_possible_transitions))
        else:
            mask = None
        dev = None if X_dev is None else dev_set(X_dev, y_dev, tagger.vocabulary_, classes,
                                                 batch.n_features)
        log = TrainingLog()
        c1 = _C1 if self.c1 is None else float(self.c1)
        c2 = _C2 if self.c2 is None else float(self.c2)
        on_pass = pass_recorder(log, dev, classes, batch.n_sequences, alg.regularized, c1, c2,
                                self.verbose)
        flat = None
        rule = stopping_rule(self, alg)
        if rule is not None:
            best = _l2sgd_rule(log, on_pass, *rule)
            tagger.fit_batch(batch, n_passes=tagger.max_iter, allowed=mask, callback=best,
                             eta0_search=calibration_params(self, alg) or None)
            flat = best.weights
        elif alg.per_pass:
            tagger.fit_batch(batch, n_passes=tagger.max_iter, allowed=mask,
                             callback=on_pass)
        else:
            tagger.fit_batch(batch, n_passes=tagger.max_iter, allowed=mask)
            on_pass(tagger)
        model = deployed_model(tagger, batch, classes, mask, flat)
        for attr in ("_model_", "_training_log", "estimator_"):
            self.__dict__.pop(attr, None)
        self._model_ = model
        self._training_log = log
        if self.keep_training_state:
            self.estimator_ = tagger
        if self.model_filename is not None:
            model.save(self.model_filename)
        return self

    # ---- the model ------------------------------------------------------------------
    @property
    def _model(self):
        model = self.__dict__.get("_model_")
        if model is None and self.model_filename is not None and os.path.exists(
                self.model_filename):
            model = CRFModel.load(self.model_filename)
            self._model_ = model
        return model

    def _fitted_model(self):
        model = self._model
        if model is None:
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("This CRF instance is not fitted yet: call 'fit' first "
                                 "(or give model_filename of a saved model).")
        return model

    @property
    def tagger_(self):
        """The model behind pycrfsuite's ``Tagger`` methods (None before ``fit``)."""
        model = self._model
        if model is None:
            return None
        tagger = self.__dict__.get("_tagger")
        if tagger is None or tagger.model is not model:
            tagger = self._tagger = Tagger(model)
        return tagger

    @property
    def training_log_(self):
        """The training log, one record per pass (None before ``fit``)."""
        return self.__dict__.get("_training_log")

    # The fitted model's figures, None before ``fit``.
    classes_ = _model_property(lambda model: list(model.labels),
                               "The labels as a list, in CRFsuite's order (None before ``fit``).")
    size_ = _model_property(lambda model: model.size,
                            "The size of the model file in bytes (None before ``fit``).")
    num_attributes_ = _model_property(
        lambda model: len(model.attributes),
        "The number of attributes with a non-zero weight (None before ``fit``).")
    attributes_ = _model_property(lambda model: list(model.attributes),
                                  "The attributes with a non-zero weight (None before ``fit``).")
    state_features_ = _model_property(
        lambda model: model.state_features(),
        "``{(attribute, label): weight}`` of the non-zero state weights (None before ``fit``).")
    transition_features_ = _model_property(
        lambda model: model.transition_features(),
        "``{(label_from, label_to): weight}``, non-zero transitions (None before ``fit``).")

    # ---- prediction ---------------------------------------------------------------
    def predict(self, X):
        """Predict the labels of every sequence (Viterbi).

        Parameters
        ----------
        X : list of sequences
            In the form used for fitting.

        Returns
        -------
        y : ndarray of dtype object
            ``np.array(list of label lists, dtype=object)``, what
            sklearn-crfsuite returns.
        """
        return np.array(self._fitted_model().tag(X), dtype=object)

    def predict_single(self, xseq):
        """Predict the labels of one sequence.

        Parameters
        ----------
        xseq : list
            One sequence of token features.

        Returns
        -------
        y : list of str
            The labels.
        """
        return self._fitted_model().tag([xseq])[0]

    def predict_marginals(self, X):
        """Compute the marginal probability of every label at every token.

        Parameters
        ----------
        X : list of sequences
            In the form used for fitting.

        Returns
        -------
        marginals : ndarray of dtype object
            One list of ``{label: probability}`` dicts per sequence.
        """
        model = self._fitted_model()
        return np.array([[dict(zip(model.labels, row)) for row in P.tolist()]
                         for P in model.marginals(X)], dtype=object)

    def predict_marginals_single(self, xseq):
        """Compute the marginal probability of every label at every token of one sequence.

        Parameters
        ----------
        xseq : list
            One sequence of token features.

        Returns
        -------
        marginals : list of dict
            ``{label: probability}`` per token.
        """
        model = self._fitted_model()
        return [dict(zip(model.labels, row)) for row in model.marginals([xseq])[0].tolist()]

    def score(self, X, y):
        """Return the flat token accuracy on ``X``, ``y``.

        Parameters
        ----------
        X : list of sequences
            In the form used for fitting.
        y : list of lists of str
            The true labels.

        Returns
        -------
        score : float
            The fraction of tokens labelled correctly.
        """
        return flat_accuracy_score(y, self._fitted_model().tag(X))

    def __getstate__(self):
        state = super().__getstate__().copy()
        state.pop("_tagger", None)        # (rebuilt on demand, as sklearn-crfsuite's)
        return state


def _l2sgd_rule(log, on_pass, period, delta):
    """The per-pass callback of CRFsuite's l2sgd: records the pass (``on_pass``),
    keeps the weights of the pass with the lowest objective (its ``weights``
    attribute: the model CRFsuite's l2sgd returns), and stops when the
    objective improved by less than ``delta`` (relative) over the last
    ``period`` passes (``train_l2sgd.c``: from pass ``period + 1`` on,
    ``(loss[k - period] - loss[k]) / loss[k] < delta``)."""
    best = [np.inf]

    def callback(t):
        on_pass(t)
        losses = [rec["loss"] for rec in log.iterations]
        loss = losses[-1]
        if loss < best[0]:
            best[0], callback.weights = loss, t.flat_weights_
        k = len(losses)
        return k > period and (losses[k - 1 - period] - loss) / loss < delta

    callback.weights = None
    return callback
