"""sklearn_secondorder.crfsuite.CRF against sklearn-crfsuite / pycrfsuite on the same data."""
import gzip
import inspect
import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import cross_val_score

from sklearn_secondorder import ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger
from sklearn_secondorder._core._crf_infer import loglik_gradient
from sklearn_secondorder._core._weights import ScaledWeights
from sklearn_secondorder.crfsuite import (
    ALGORITHMS,
    CRF,
    Algorithm,
    available_algorithms,
    metrics,
    register_algorithm,
    scorers,
)
from sklearn_secondorder.crfsuite._features import feature_mask
from sklearn_secondorder.crfsuite._registry import penalty_params
from sklearn_secondorder.sequence._input import read_sequences, vectorize_dicts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# every form pycrfsuite.ItemSequence accepts
FORMS = [
    [{"w": "a", "n": 1.5, "i": 2, "b": True, "f": False, "z": 0.0, "bb": b"q", b"k": "v",
      "d": {"e": 1, "f": "g", "h": {"i": 0.5}}, "l": ["x", "y"], "s": {"u"}},
     ["s1", "s2"], ("t1",), {"w": "b"}],
    [{"w": "a", "n": 2}, ["s1"]],
]
FORMS_Y = [["A", "B", "A", "C"], ["B", "A"]]


class AvgSGD(SGDSequenceTagger):
    """A tagger registered as a new algorithm (one registry entry)."""


class PenaltyASF(ASFSequenceTagger):
    """An ASF tagger with scikit-learn's `penalty` / `l1_ratio` parameters
    (recorded, not used): the facade's mapping, end to end."""

    def __init__(self, *, alpha=1e-4, max_iter=10, eta0="auto", fit_intercept=True,
                 shuffle=True, random_state=None, n_latent=1, verbose=0, penalty="l2",
                 l1_ratio=0.15):
        super().__init__(alpha=alpha, max_iter=max_iter, eta0=eta0,
                         fit_intercept=fit_intercept, shuffle=shuffle,
                         random_state=random_state, n_latent=n_latent, verbose=verbose)
        self.penalty = penalty
        self.l1_ratio = l1_ratio


def toy(n=60, seed=0):
    """Noisy chunk-like sequences with string and numeric features."""
    rng = np.random.RandomState(seed)
    words = {"D": ["the", "a"], "N": ["dog", "cat", "idea"], "V": ["runs", "sees"]}
    X, y = [], []
    for _ in range(n):
        labs = ["D", "N", "V", "D", "N"][: rng.randint(2, 6)]
        X.append([{"w": words[lab][rng.randint(len(words[lab]))], "len": rng.rand(),
                   "pos": {"first": float(i == 0)}} for i, lab in enumerate(labs)])
        y.append(labs)
    return X, y


# ---- input forms and names -------------------------------------------------------
def _token_dicts(X):
    vocab = {}
    data, indices, indptr, offsets = vectorize_dicts(X, vocab, grow=True)
    names = {j: k for k, j in vocab.items()}
    out = []
    for r in range(indptr.size - 1):
        d = {}
        for k in range(indptr[r], indptr[r + 1]):
            d[names[indices[k]]] = d.get(names[indices[k]], 0.0) + data[k]
        out.append(d)
    return out


def test_every_item_sequence_form_reads_as_pycrfsuite():
    pycrfsuite = pytest.importorskip("pycrfsuite")
    ours = _token_dicts(FORMS)
    theirs = [d for seq in FORMS for d in pycrfsuite.ItemSequence(seq).items()]
    assert ours == theirs
    # a pycrfsuite.ItemSequence is itself a sequence
    assert _token_dicts([pycrfsuite.ItemSequence(s) for s in FORMS]) == theirs


# tokens given as bare strings: pycrfsuite iterates them (each character an
# attribute of value 1; "John" is J, o, h, n), and so does sklearn-crfsuite
WORDS_X = [["John", "runs", "fast"], ["Mary", "walks"], ["he", "runs"], ["Mary", "runs"]]
WORDS_Y = [["N", "V", "A"], ["N", "V"], ["N", "V"], ["N", "V"]]


def test_bare_string_tokens_read_as_pycrfsuite():
    pycrfsuite = pytest.importorskip("pycrfsuite")
    theirs = [d for seq in WORDS_X for d in pycrfsuite.ItemSequence(seq).items()]
    assert _token_dicts(WORDS_X) == theirs
    assert _token_dicts(WORDS_X)[0] == {"J": 1.0, "o": 1.0, "h": 1.0, "n": 1.0}
    # mixed with the other forms in one sequence
    mixed = [["ab", {"w": "x"}, ["c"]]]
    assert _token_dicts(mixed) == [d for d in pycrfsuite.ItemSequence(mixed[0]).items()]


def test_bare_string_tokens_fit_as_sklearn_crfsuite():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    ref = sklearn_crfsuite.CRF(algorithm="lbfgs", max_iterations=50).fit(WORDS_X, WORDS_Y)
    ours = CRF(algorithm="lbfgs", max_iterations=50).fit(WORDS_X, WORDS_Y)
    assert ours.attributes_ == ref.attributes_
    assert set(ours.state_features_) == set(ref.state_features_)
    assert [list(p) for p in ours.predict(WORDS_X)] == [list(p) for p in ref.predict(WORDS_X)]
    assert ours.predict_single(["Jo"]) == ref.predict_single(["Jo"])
    # the taggers read them the same way: as the lists of their characters
    as_lists = [[list(w) for w in seq] for seq in WORDS_X]
    for Tagger in (ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger):
        a = Tagger(random_state=0, max_iter=3).fit(WORDS_X, WORDS_Y)
        b = Tagger(random_state=0, max_iter=3).fit(as_lists, WORDS_Y)
        assert a.attributes_ == b.attributes_
        assert_allclose(a.coef_, b.coef_, rtol=0, atol=0)
        assert list(a.predict(WORDS_X)) == list(b.predict(as_lists))


def test_bad_values_and_names_are_named():
    with pytest.raises(TypeError, match="feature 'w' has a value of type NoneType"):
        vectorize_dicts([[{"w": None}]], {}, True)
    with pytest.raises(TypeError, match="feature name 3 is a int"):
        vectorize_dicts([[{"d": {3: 1.0}}]], {}, True)


@pytest.mark.parametrize("params", [
    {}, {"min_freq": 1.5}, {"min_freq": 2}, {"all_possible_states": True},
    {"all_possible_transitions": True}, {"all_possible_states": True, "min_freq": 1}])
def test_names_and_generated_features_equal_crfsuites(params):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = FORMS + toy(30)[0], FORMS_Y + toy(30)[1]
    ref = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=0.01, max_iterations=30, **params)
    ref.fit(X, y)
    ours = CRF(c2=0.01, max_iterations=20, **params).fit(X, y)
    assert ours.attributes_ == ref.attributes_
    assert ours.num_attributes_ == ref.num_attributes_
    assert ours.classes_ == ref.classes_
    assert set(ours.state_features_) == set(ref.state_features_)
    assert set(ours.transition_features_) == set(ref.transition_features_)


def test_tutorial_features_on_conll2000_name_as_crfsuite():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    path = DATA / "conll2000" / "train.txt.gz"
    if not path.exists():
        pytest.skip("../shared/data/conll2000 is absent")
    with gzip.open(path, "rt") as f:
        sents = [[tuple(line.split()) for line in b.splitlines()]
                 for b in f.read().strip().split("\n\n")[:150]]
    X = [[{"bias": 1.0, "word.lower()": s[i][0].lower(), "word.istitle()": s[i][0].istitle(),
           "postag": s[i][1], "-1:postag": s[i - 1][1] if i else "BOS"}
          for i in range(len(s))] for s in sents]
    y = [[t[2] for t in s] for s in sents]
    ref = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=0.1, max_iterations=20).fit(X, y)
    ours = CRF(c2=0.1, max_iterations=3).fit(X, y)
    assert ours.attributes_ == ref.attributes_
    assert set(ours.state_features_) == set(ref.state_features_)
    assert set(ours.transition_features_) == set(ref.transition_features_)


def test_feature_mask_by_brute_force():
    X, y = toy(25, seed=3)
    X[0][0]["neg"] = -2.0                     # frequency < 0: dropped even at min_freq=0
    tagger = ASFSequenceTagger()
    batch = read_sequences(tagger, X, y, fitting=True, first=True)
    classes = np.unique(batch.labels)
    lab = np.searchsorted(classes, batch.labels)
    vocab = tagger.vocabulary_
    A, L = len(vocab), classes.size
    for min_freq, all_s, all_t in itertools.product([0, 1, 2.5], [False, True], [False, True]):
        freq, seen = np.zeros((A, L)), np.zeros((A, L), bool)
        tok = 0
        for seq in X:
            for feats in seq:
                for name, v in _token_dicts([[feats]])[0].items():
                    freq[vocab[name], lab[tok]] += v
                    seen[vocab[name], lab[tok]] = True
                tok += 1
        trans = np.zeros((L, L))
        for seq in y:
            for a, b in zip(seq[:-1], seq[1:]):
                trans[np.searchsorted(classes, a), np.searchsorted(classes, b)] += 1
        want_s = np.where(seen, freq >= min_freq, all_s and min_freq <= 0)
        want_t = np.where(trans > 0, trans >= min_freq, all_t and min_freq <= 0)
        mask = feature_mask(batch, lab, L, min_freq=min_freq, all_states=all_s,
                            all_transitions=all_t)
        if mask is None:
            assert all_s and all_t and min_freq <= 0
            continue
        assert_allclose(mask[:A * L].reshape(A, L), want_s)
        assert_allclose(mask[A * L:A * L + L * L].reshape(L, L), want_t)
        assert np.all(mask[A * L + L * L:] == 1)


def test_taggers_take_the_same_input_forms():
    tagger = SGDSequenceTagger(max_iter=3, random_state=0).fit(FORMS, FORMS_Y)
    assert {"d:h:i", "l:x", "s1", "t1", "w:a", "bb:q", "k:v"} <= set(tagger.attributes_)
    assert len(tagger.predict(FORMS)[0]) == 4


# ---- the restricted gradient (CRFContext.set_allowed) ---------------------------
def test_masked_gradient_is_the_full_gradient_masked():
    X, y = toy(12, seed=2)
    tagger = ASFSequenceTagger()
    batch = read_sequences(tagger, X, y, fitting=True, first=True)
    classes = np.unique(batch.labels)
    lab = np.searchsorted(classes, batch.labels).astype(np.int32)
    A, L = batch.n_features, classes.size
    ds = batch.sequence_data(A, lab)
    w = np.random.RandomState(0).normal(size=(A + L + 1) * L)
    mask = feature_mask(batch, lab, L, min_freq=0, all_states=False, all_transitions=False)
    w_masked = w * mask
    ll, full = loglik_gradient(ds, ScaledWeights(w_masked, L), 1, True)
    ll2, restricted = loglik_gradient(ds, ScaledWeights(w_masked, L), 1, True, mask)
    assert ll == ll2
    assert_allclose(restricted, full * mask)
    assert np.any((full != 0) & (mask == 0))        # the mask does remove something
    with pytest.raises(ValueError, match="allowed has 3 entries"):
        loglik_gradient(ds, ScaledWeights(w, L), 1, True, np.ones(3, np.uint8))


@pytest.mark.parametrize("algorithm", ["asf", "l2sgd", "psa"])
def test_weights_that_do_not_exist_stay_zero(algorithm):
    X, y = toy(40, seed=4)
    crf = CRF(algorithm=algorithm, c2=0.1, keep_training_state=True).fit(X, y)
    tagger = crf.estimator_
    batch = read_sequences(ASFSequenceTagger(), X, y, fitting=True, first=True)
    classes = np.unique(batch.labels)
    lab = np.searchsorted(classes, batch.labels)
    mask = feature_mask(batch, lab, classes.size, min_freq=0, all_states=False,
                        all_transitions=False)
    w = tagger._state.crf.coef
    assert np.all(w[mask == 0] == 0) and np.count_nonzero(w[mask == 1]) > 0


def test_psa_full_mask_is_the_unmasked_kernel_and_min_freq_is_honoured():
    # a mask of ones is the unmasked PSA kernel bit for bit (a multiplication
    # by 1.0); a frequency cut-off leaves the cut weights at 0
    X, y = toy(30, seed=5)
    tagger = PSASequenceTagger(alpha=1e-3, random_state=0, max_iter=2)
    batch = read_sequences(tagger, X, y, fitting=True, first=True)
    n_weights = (batch.n_features + len(set(sum(y, []))) + 1) * len(set(sum(y, [])))
    ones = clone(tagger)._fit_prepared(batch, n_epochs=2, allowed=np.ones(n_weights, np.uint8))
    plain = clone(tagger).fit(X, y)
    np.testing.assert_array_equal(ones._state.crf.coef, plain._state.crf.coef)
    cut = CRF(algorithm="psa", c2=0.1, min_freq=3, keep_training_state=True).fit(X, y)
    batch = read_sequences(ASFSequenceTagger(), X, y, fitting=True, first=True)
    lab = np.searchsorted(cut.classes_, batch.labels)
    mask = feature_mask(batch, lab, len(cut.classes_), min_freq=3, all_states=False,
                        all_transitions=False)
    w = cut.estimator_._state.crf.coef
    assert np.count_nonzero(mask == 0) > 0
    assert np.all(w[mask == 0] == 0) and np.count_nonzero(w[mask == 1]) > 0


def test_eta0_calibration_trains_the_masked_model():
    # the trial passes of Bottou's calibration train the weights that exist:
    # with none, no eta moves the model, so the walk keeps its start (0.1)
    # and returns half of it; with all of them it is the unmasked search
    from sklearn_secondorder._calibration import calibrate_crf_eta0
    X, y = toy(40, seed=6)
    batch = read_sequences(ASFSequenceTagger(), X, y, fitting=True, first=True)
    classes = np.unique(batch.labels)
    lab = np.searchsorted(classes, batch.labels).astype(np.int32)
    A, L = batch.n_features, classes.size
    ds = batch.sequence_data(A, lab)
    kw = dict(n_states=L, n_latent=1, lam=1e-3, fit_intercept=True)
    coef = np.zeros((A + L + 1) * L)
    free = calibrate_crf_eta0(ds, coef, **kw)
    assert calibrate_crf_eta0(ds, coef, allowed=np.ones(coef.size, np.uint8), **kw) == free
    assert free != 0.05
    assert calibrate_crf_eta0(ds, coef, allowed=np.zeros(coef.size, np.uint8), **kw) == 0.05


def test_kept_tagger_continues_with_new_attributes():
    X, y = toy(30, seed=14)
    crf = CRF(c2=0.1, max_iterations=2, keep_training_state=True).fit(X, y)
    est = crf.estimator_
    mask = est._state.crf.allowed.copy()
    A = est._state.crf.n_attributes
    est.partial_fit([[{"w": "new", "x": 1.0}, {"w": "dog"}]], [["D", "N"]])
    H = est._state.crf.n_states
    grown = est._state.crf.allowed
    assert grown.size == mask.size + 2 * H          # two new attributes, rows all exist
    assert_allclose(grown[:A * H], mask[:A * H])
    assert_allclose(grown[(A + 2) * H:], mask[A * H:])
    assert np.all(est._state.crf.coef[:A * H][mask[:A * H] == 0] == 0)


def test_solution_matches_crfsuite_lbfgs():
    """Same objective (c2 mapped exactly, the same features): ASF's weights
    approach CRFsuite L-BFGS's optimum."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = toy(80, seed=1)
    ref = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=1.0, max_iterations=500,
                               epsilon=1e-9).fit(X, y)
    ours = CRF(c2=1.0, max_iterations=60).fit(X, y)
    sf, rf = ours.state_features_, ref.state_features_
    keys = sorted(rf)
    assert_allclose([sf.get(k, 0.0) for k in keys], [rf[k] for k in keys], atol=0.03)
    tr, rt = ours.transition_features_, ref.transition_features_
    assert_allclose([tr.get(k, 0.0) for k in sorted(rt)], [rt[k] for k in sorted(rt)],
                    atol=0.03)


# ---- parameters ------------------------------------------------------------------
def test_signature_has_every_sklearn_crfsuite_argument():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    theirs = inspect.signature(sklearn_crfsuite.CRF.__init__).parameters
    ours = inspect.signature(CRF.__init__).parameters
    for name, p in theirs.items():
        assert name in ours, name
        assert ours[name].default == p.default, name


def test_penalty_mapping_is_crfsuites_objective():
    n = 40
    out = penalty_params("x", 0.0, 0.5, n, {"alpha": 1})
    assert out == {"alpha": 1.0 / n}
    out = penalty_params("x", 0.3, 0.5, n, {"alpha": 1, "penalty": "l2", "l1_ratio": 0})
    assert_allclose(out["alpha"], 1.3 / n)
    assert out["penalty"] == "elasticnet"
    # alpha * l1_ratio = c1 / n and alpha * (1 - l1_ratio) / 2 = c2 / n
    assert_allclose(out["alpha"] * out["l1_ratio"], 0.3 / n)
    assert_allclose(out["alpha"] * (1 - out["l1_ratio"]) / 2, 0.5 / n)
    assert penalty_params("x", 0, 0.5, n, {"penalty": "l2", "l1_ratio": 0.15}) == {
        "alpha": 1.0 / n, "penalty": "l2", "l1_ratio": 0.0}
    with pytest.raises(ValueError, match="L1 regularization is not yet available for "
                                         "algorithm='x'"):
        penalty_params("x", 0.1, 0.5, n, {"alpha": 1})


def test_c2_is_the_taggers_alpha():
    X, y = toy(30)
    crf = CRF(c2=0.7, keep_training_state=True).fit(X, y)
    assert_allclose(crf.estimator_.alpha, 2 * 0.7 / len(X))
    assert crf.estimator_.fit_intercept is False


def test_c1_gives_a_sparser_model_when_l1_exists():
    if "penalty" not in ASFSequenceTagger().get_params():
        pytest.skip("the taggers have no `penalty` parameter yet (L1 is being added)")
    X, y = toy(80, seed=5)
    dense = CRF(c1=0.0, c2=0.1).fit(X, y)
    sparse = CRF(c1=2.0, c2=0.1, keep_training_state=True).fit(X, y)
    assert sparse.estimator_.penalty == "elasticnet"
    assert len(sparse.state_features_) < len(dense.state_features_)


def test_c1_reaches_a_tagger_with_penalty():
    X, y = toy(30)
    try:
        register_algorithm(Algorithm("penalized", f"{__name__}:PenaltyASF",
                                     {"max_iterations": "max_iter"}))
        crf = CRF(algorithm="penalized", c1=0.2, c2=0.1, max_iterations=2,
                  keep_training_state=True).fit(X, y)
        est = crf.estimator_
        assert est.penalty == "elasticnet"
        assert_allclose([est.alpha, est.l1_ratio], [0.4 / len(X), 0.5])
        crf.set_params(c1=None).fit(X, y)
        assert crf.estimator_.penalty == "l2" and crf.estimator_.l1_ratio == 0.0
    finally:
        ALGORITHMS.pop("penalized", None)


def test_c1_without_l1_is_a_clear_error():
    if "penalty" in ASFSequenceTagger().get_params():
        pytest.skip("L1 is available")
    with pytest.raises(ValueError, match="L1 regularization is not yet available"):
        CRF(c1=0.1).fit(*toy(10))


def test_algorithm_errors_and_registry():
    X, y = toy(10)
    assert {"asf", "psa", "l2sgd"} <= set(available_algorithms())
    with pytest.raises(ValueError, match="algorithm='nope' is unknown; the available "
                                         "algorithms are .*'asf', 'l2sgd'"):
        CRF(algorithm="nope").fit(X, y)
    try:          # an entry whose tagger is not there (yet): listed as not available
        register_algorithm(Algorithm("later", f"{__name__}:NotYetATagger"))
        assert "later" not in available_algorithms()
        with pytest.raises(ValueError, match="algorithm='later' is not available; the "
                                             "available algorithms are 'ap', "):
            CRF(algorithm="later").fit(X, y)
    finally:
        ALGORITHMS.pop("later", None)
    with pytest.raises(ValueError, match="algorithm=.asf. does not use num_memories, "
                                         "epsilon; it takes c1, c2, max_iterations"):
        CRF(algorithm="asf", epsilon=1e-3, num_memories=3).fit(X, y)
    with pytest.raises(ValueError, match="trainer_cls"):
        CRF(trainer_cls=object).fit(X, y)
    with pytest.raises(ValueError, match="c2 must be a finite number >= 0"):
        CRF(c2=-1).fit(X, y)
    with pytest.raises(ValueError, match="Pass both X_dev and y_dev"):
        CRF().fit(X, y, X_dev=X)
    with pytest.raises(TypeError, match="labels must be str"):
        CRF().fit(X, [[1] * len(s) for s in y])

    try:
        register_algorithm(Algorithm("avgsgd", f"{__name__}:AvgSGD",
                                     {"max_iterations": "max_iter"}, fixed={"average": True}))
        crf = CRF(algorithm="avgsgd", max_iterations=2, keep_training_state=True).fit(X, y)
        assert isinstance(crf.estimator_, AvgSGD) and crf.estimator_.average
        assert crf.estimator_.n_iter_ == 2 and len(crf.training_log_) == 2
        # a trainer run in one call: one record, all its passes' seconds
        register_algorithm(Algorithm("onecall", f"{__name__}:AvgSGD",
                                     {"max_iterations": "max_iter"}, per_pass=False))
        crf = CRF(algorithm="onecall", max_iterations=3, keep_training_state=True).fit(X, y)
        assert crf.estimator_.n_iter_ == 3 and len(crf.training_log_) == 1
        assert_allclose(crf.training_log_[0]["time"], sum(crf.estimator_.pass_seconds_))
    finally:
        ALGORITHMS.pop("avgsgd", None)
        ALGORITHMS.pop("onecall", None)


# ---- training feedback -----------------------------------------------------------
def test_training_log_and_dev_scores(capsys):
    X, y = toy(60, seed=6)
    Xd, yd = toy(20, seed=7)
    crf = CRF(c2=0.1, max_iterations=4, verbose=True).fit(X, y, Xd, yd)
    log = crf.training_log_
    assert len(log) == 4 and [r["num"] for r in log] == [1, 2, 3, 4]
    last = log.last_iteration
    assert last["active_features"] == len(crf.state_features_) + len(
        crf.transition_features_)
    pred = crf.predict(Xd)
    assert_allclose(last["item_accuracy_float"], metrics.flat_accuracy_score(yd, pred))
    assert_allclose(last["instance_accuracy_float"],
                    metrics.sequence_accuracy_score(yd, list(pred)))
    flat_true = [v for s in yd for v in s]
    flat_pred = [v for s in pred for v in s]
    for lab, sc in last["scores"].items():
        assert sc.ref == flat_true.count(lab) and sc.model == flat_pred.count(lab)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and out[0].startswith("Iter 1") and "F1=" in out[0]
    no_dev = CRF(c2=0.1, max_iterations=2).fit(X, y).training_log_
    assert no_dev.last_iteration["scores"] == {} and "avg_f1" not in no_dev.last_iteration


# ---- after fit -------------------------------------------------------------------
def test_unfitted_is_none_as_sklearn_crfsuite():
    crf = CRF()
    for attr in ("tagger_", "classes_", "size_", "num_attributes_", "attributes_",
                 "state_features_", "transition_features_", "training_log_"):
        assert getattr(crf, attr) is None
    with pytest.raises(NotFittedError):
        crf.predict([[{"a": 1}]])


def test_predictions_tagger_and_marginals():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = toy(50, seed=8)
    crf = CRF(c2=0.1).fit(X, y)
    ref = sklearn_crfsuite.CRF(c2=0.1, max_iterations=50).fit(X, y)
    pred, rpred = crf.predict(X[:4]), ref.predict(X[:4])
    assert type(pred) is type(rpred) and pred.dtype == rpred.dtype
    same = [X[0], X[0]]                 # equal lengths: a 2-D object array in both
    assert crf.predict(same).shape == ref.predict(same).shape
    assert crf.predict_single(X[0]) == crf.tagger_.tag(X[0]) == list(pred[0])
    tagger = crf.tagger_
    assert tagger.labels() == crf.classes_
    xs = X[0][:3]
    tagger.set(xs)
    marg = crf.predict_marginals_single(xs)
    # brute force over every label path
    paths = list(itertools.product(crf.classes_, repeat=len(xs)))
    probs = np.array([tagger.probability(list(p)) for p in paths])
    assert_allclose(probs.sum(), 1.0)
    assert list(paths[probs.argmax()]) == tagger.tag()
    for t in range(len(xs)):
        for lab in crf.classes_:
            want = sum(p for p, path in zip(probs, paths) if path[t] == lab)
            assert_allclose(marg[t][lab], want, atol=1e-12)
            assert_allclose(tagger.marginal(lab, t), want, atol=1e-12)
    assert len(crf.predict_marginals(X[:3])) == 3
    # an empty sequence is tagged [] (pycrfsuite's answer), between the others
    empty = crf.predict([X[0], [], X[1]])
    assert_empty = ref.predict([X[0], [], X[1]])
    assert [list(p) for p in empty] == [list(p) for p in pred[:1]] + [[]] + [list(pred[1])]
    assert [len(p) for p in empty] == [len(p) for p in assert_empty]
    assert crf.predict_marginals_single([]) == [] and crf.predict([]).size == 0
    info = tagger.info()
    assert int(info.header["num_attrs"]) == crf.num_attributes_
    assert info.state_features == crf.state_features_
    assert_allclose(crf.score(X, y), metrics.flat_accuracy_score(y, crf.predict(X)))


def test_a_failed_fit_leaves_the_model_as_it_was():
    X, y = toy(30, seed=13)
    crf = CRF(c2=0.1).fit(X, y)
    before = crf.state_features_
    with pytest.raises(ValueError, match="sequence 1 has"):
        crf.fit(X[:2], [y[0], y[1][:-1]])
    with pytest.raises(TypeError, match="CRF takes pycrfsuite's input"):
        crf.fit(np.ones((4, 3)), ["A", "B", "A", "B"])
    assert crf.state_features_ == before


def test_model_file_round_trip(tmp_path):
    X, y = toy(40, seed=9)
    path = str(tmp_path / "model.npz")
    crf = CRF(c2=0.1, model_filename=path).fit(X, y)
    assert Path(path).stat().st_size == crf.size_
    loaded = CRF(model_filename=path)
    assert loaded.classes_ == crf.classes_
    assert loaded.state_features_ == crf.state_features_
    assert [list(p) for p in loaded.predict(X)] == [list(p) for p in crf.predict(X)]


def test_reads_a_crfsuite_model_file(tmp_path):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = toy(40, seed=10)
    path = str(tmp_path / "model.crfsuite")
    ref = sklearn_crfsuite.CRF(c2=0.1, max_iterations=30, model_filename=path)
    ref.fit(X, y)
    ours = CRF(model_filename=path)
    assert ours.classes_ == ref.classes_ and ours.attributes_ == ref.attributes_
    assert ours.state_features_.keys() == ref.state_features_.keys()
    assert [list(p) for p in ours.predict(X)] == [list(p) for p in ref.predict(X)]
    m, rm = ours.predict_marginals_single(X[0]), ref.predict_marginals_single(X[0])
    for a, b in zip(m, rm):
        assert_allclose([a[k] for k in sorted(a)], [b[k] for k in sorted(b)], atol=1e-5)


def test_pickle_is_deployment_size():
    X, y = toy(60, seed=11)
    crf = CRF(c2=0.1).fit(X, y)
    blob = pickle.dumps(crf)
    assert len(blob) < crf.size_ + 4000          # the model, not the training state
    back = pickle.loads(blob)
    assert [list(p) for p in back.predict(X)] == [list(p) for p in crf.predict(X)]
    assert back.training_log_ is not None and not hasattr(back, "estimator_")
    kept = CRF(c2=0.1, keep_training_state=True).fit(X, y)
    assert len(pickle.dumps(kept)) > len(blob) and hasattr(pickle.loads(
        pickle.dumps(kept)), "estimator_")


def test_model_selection_as_the_tutorial():
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import RandomizedSearchCV
    X, y = toy(60, seed=12)
    crf = CRF(max_iterations=3)
    scores = cross_val_score(clone(crf), X, y, cv=3, scoring=scorers.flat_accuracy)
    assert scores.shape == (3,) and np.all(scores > 0.5)
    f1 = make_scorer(metrics.flat_f1_score, average="weighted", labels=["N", "V"])
    rs = RandomizedSearchCV(crf, {"c2": [0.01, 0.1, 1.0]}, n_iter=2, cv=2, scoring=f1,
                            random_state=0).fit(X, y)
    assert rs.best_estimator_.classes_ is not None


# ---- metrics as sklearn_crfsuite.metrics ----------------------------------------------
@pytest.mark.parametrize("name,kwargs", [
    ("flat_accuracy_score", {}), ("flat_precision_score", {"average": "macro"}),
    ("flat_recall_score", {"average": "micro"}),
    ("flat_f1_score", {"average": "weighted", "labels": ["B-NP", "I-NP"]}),
    ("flat_fbeta_score", {"beta": 0.5, "average": "macro"}),
    ("flat_classification_report", {"labels": ["B-NP", "I-NP", "O"], "digits": 3}),
    ("sequence_accuracy_score", {})])
def test_metrics_equal_sklearn_crfsuites(name, kwargs):
    theirs = pytest.importorskip("sklearn_crfsuite.metrics")
    gold = [["B-NP", "I-NP", "O"], ["O", "B-NP"], ["B-NP", "I-NP", "I-NP", "O"]]
    pred = [["B-NP", "O", "O"], ["O", "B-NP"], ["B-NP", "I-NP", "O", "O"]]
    ours = getattr(metrics, name)(gold, pred, **kwargs)
    ref = getattr(theirs, name)(gold, pred, **kwargs)
    if isinstance(ref, str):
        assert ours == ref
    else:
        assert_allclose(ours, ref)


def test_metric_edge_cases():
    theirs = pytest.importorskip("sklearn_crfsuite.metrics")
    assert metrics.sequence_accuracy_score([], []) == theirs.sequence_accuracy_score([], [])
    # sequences of other lengths than their gold ones are wrong, not an error
    y_true, y_pred = [[1, 2], [3]], [[3], [1, 2]]
    assert (metrics.sequence_accuracy_score(y_true, y_pred)
            == theirs.sequence_accuracy_score(y_true, y_pred) == 0)
    # (sklearn-crfsuite gives 0 here too: its NumPy comparison of a ragged
    # array with a (2, 1) one broadcasts; sequence 0 is right)
    assert metrics.sequence_accuracy_score([["a"], ["b", "c"]], [["a"], ["b"]]) == 0.5
    with pytest.raises(ValueError, match="y_true has 2 sequences but y_pred has 1"):
        metrics.sequence_accuracy_score([["a"], ["b"]], [["a"]])
    with pytest.raises(ValueError):
        theirs.flat_accuracy_score([], [])
    with pytest.raises(ValueError):
        metrics.flat_accuracy_score([], [])
    with pytest.raises(ValueError, match="sequence 0"):
        metrics.flat_f1_score([["a", "b"]], [["a"]], average="macro")
    # every sequence of one length: whole sequences still (sklearn-crfsuite counts tokens)
    assert metrics.sequence_accuracy_score([["a", "b"], ["a", "b"]],
                                           [["a", "c"], ["a", "b"]]) == 0.5
    y_pred = np.array([["a", "b"], ["a", "b"]], dtype=object)    # predict's 2-D form
    assert metrics.flat_accuracy_score([["a", "b"], ["a", "c"]], y_pred) == 0.75


# ---- docstrings (numpydoc, as tests/test_docstrings.py) ---------------------------
def _crfsuite_public_objects():
    import sklearn_secondorder.crfsuite as pkg
    for cls in (pkg.CRF, pkg.Tagger, pkg.CRFModel, pkg.TrainingLog):
        yield f"{pkg.__name__}.{cls.__name__}"
        for name in sorted(vars(cls)):
            if not name.startswith("_"):
                yield f"{pkg.__name__}.{cls.__name__}.{name}"
    for fn in ("available_algorithms", "register_algorithm"):
        yield f"{pkg.__name__}.{fn}"


@pytest.mark.parametrize("name", list(_crfsuite_public_objects()))
def test_docstring(name):
    validate = pytest.importorskip("numpydoc.validate").validate
    ignored = {"EX01", "SA01", "ES01", "RT02"}
    errors = [(c, m) for c, m in validate(name)["errors"] if c not in ignored]
    assert not errors, f"{name}:\n" + "\n".join(f"  {c}: {m}" for c, m in errors)


@pytest.mark.parametrize("algorithm,params", [
    ("lbfgs", {"c1": 0.05, "c2": 0.5, "max_iterations": 60}),
    ("lbfgs", {"c2": 0.5, "all_possible_states": True, "all_possible_transitions": True}),
    ("ap", {"max_iterations": 3}), ("pa", {"max_iterations": 3, "pa_type": 2}),
    ("arow", {"max_iterations": 3, "gamma": 2.0})])
def test_crfsuites_own_trainers_through_the_facade(algorithm, params):
    """lbfgs, ap, pa, arow: one registry entry each; CRFsuite's features and
    names; L-BFGS / OWL-QN reach CRFsuite's own solution."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = toy(40, seed=15)
    ours = CRF(algorithm=algorithm, keep_training_state=True, **params).fit(X, y)
    assert len(ours.training_log_) == 1
    assert ours.estimator_.fit_intercept is False
    if algorithm != "lbfgs":
        with pytest.raises(ValueError, match="does not use c2"):
            CRF(algorithm=algorithm, c2=1.0).fit(X, y)
        return
    ref = sklearn_crfsuite.CRF(algorithm="lbfgs", **params).fit(X, y)
    assert ours.attributes_ == ref.attributes_
    assert set(ours.state_features_) == set(ref.state_features_)
    keys = sorted(ref.state_features_)
    assert_allclose([ours.state_features_[k] for k in keys],
                    [ref.state_features_[k] for k in keys], atol=1e-4)
    assert_allclose(ours.training_log_.last_iteration["loss"],
                    ref.training_log_.last_iteration["loss"], rtol=1e-5)
    with pytest.raises(ValueError, match="min_freq=2 cannot be honoured"):
        CRF(algorithm="lbfgs", min_freq=2).fit(X, y)


def test_tutorial_example_skips_cleanly_without_data(tmp_path, capsys, monkeypatch):
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "examples" / "crfsuite_tutorial.py"
    spec = importlib.util.spec_from_file_location("crfsuite_tutorial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DATA", tmp_path / "absent")
    assert module.main([]) == 0
    assert "skipped" in capsys.readouterr().out
    # the tutorial's CRF, as far as this installation has its algorithm and L1
    crf = module.available(module.sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1))
    assert crf.algorithm in (None, "lbfgs") and crf.c2 == 0.1


# ---- CRFsuite's defaults, algorithm by algorithm -----------------------------------
def _conll2000_slice(n_train, n_test):
    """CoNLL-2000 with a few of the tutorial's features (``shared_data`` skips)."""
    from conftest import shared_data

    def read(split, n):
        with gzip.open(shared_data(f"conll2000/{split}.txt.gz"), "rt") as f:
            sents = [[tuple(line.split()) for line in b.splitlines()]
                     for b in f.read().strip().split("\n\n")[:n]]
        X = [[{"bias": 1.0, "w": s[i][0].lower(), "t": s[i][0].istitle(), "p": s[i][1],
               "s3": s[i][0][-3:], "-1p": s[i - 1][1] if i else "BOS",
               "+1p": s[i + 1][1] if i + 1 < len(s) else "EOS",
               "-1w": s[i - 1][0].lower() if i else "BOS"}
              for i in range(len(s))] for s in sents]
        return X, [[t[2] for t in s] for s in sents]

    return (*read("train", n_train), *read("test", n_test))


def _crfsuite_defaults(algorithm):
    """CRFsuite's own defaults of ``algorithm``, with the facade's names."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
    names = {"type": "pa_type", **{f"calibration.{k}": f"calibration_{k}" for k in
                                   ("eta", "rate", "samples", "candidates", "max_trials")}}
    return {names.get(p, p): trainer.get(p) for p in trainer.params()
            if not p.startswith("feature.")}


@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd", "ap", "pa", "arow"])
def test_defaults_are_crfsuites(algorithm):
    """Every parameter left None trains with CRFsuite's default of that
    algorithm (read from CRFsuite itself): the tagger's parameter, or the
    facade's stopping rule / calibration."""
    from sklearn_secondorder.crfsuite._params import calibration_params, stopping_rule
    from sklearn_secondorder.crfsuite._registry import get_algorithm
    theirs = _crfsuite_defaults(algorithm)
    X, y = toy(20, seed=3)
    crf = CRF(algorithm=algorithm, keep_training_state=True)
    tagger = crf.fit(X, y).estimator_
    alg, _ = get_algorithm(algorithm)
    ours = {f: tagger.get_params()[t] for f, t in alg.params.items()
            if not f.startswith("all_possible")}
    if alg.stopping:
        ours["period"], ours["delta"] = stopping_rule(crf, alg)
    keys = dict(eta_start="calibration_eta", factor="calibration_rate",
                n_samples="calibration_samples", max_trials="calibration_max_trials")
    ours.update({keys[k]: v for k, v in calibration_params(crf, alg).items()})
    if alg.regularized:
        n = len(X)
        assert tagger.alpha == pytest.approx((theirs.pop("c1", 0.0) + 2 * theirs.pop("c2")) / n)
    # calibration.candidates: the search walks while the objective improves
    theirs.pop("calibration_candidates", None)
    assert ours == pytest.approx(theirs), algorithm


def test_lbfgs_default_stops_where_crfsuites_does():
    """CRF(algorithm='lbfgs') and sklearn-crfsuite's CRF() (c2 aside): no iteration
    limit, the same epsilon / period / delta stop after the same iterations,
    at the same objective and F1."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    Xtr, ytr, Xte, yte = _conll2000_slice(300, 300)
    # (a small c2: more than 100 iterations)
    ref = sklearn_crfsuite.CRF(c2=0.02).fit(Xtr, ytr)
    ours = CRF(algorithm="lbfgs", c2=0.02, keep_training_state=True).fit(Xtr, ytr)
    n_ref = len(ref.training_log_.iterations)
    assert n_ref > 100          # (past the limit the facade had)
    # the same rule stops both: the iterates agree to rounding, which the
    # delta test on a flat objective may see a few iterations apart
    assert abs(ours.estimator_.n_iter_ - n_ref) <= max(3, 0.05 * n_ref)
    assert ours.estimator_.stop_reason_ in ("converged", "delta")
    assert_allclose(ours.training_log_.last_iteration["loss"],
                    ref.training_log_.last_iteration["loss"], rtol=1e-5)
    f1 = [metrics.flat_f1_score(yte, m.predict(Xte), average="weighted") for m in (ours, ref)]
    assert f1[0] == pytest.approx(f1[1], abs=5e-4)       # (a token or two of 300 sentences)


def test_l2sgd_default_stops_as_crfsuites():
    """CRF(algorithm='l2sgd') and sklearn-crfsuite's l2sgd at their defaults:
    up to 1000 passes, stopped by the period / delta rule (well before 1000),
    the best pass kept, the same objective to 1% and the same token F1 to
    0.5 points (the shuffles and the step-size searches differ)."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    Xtr, ytr, Xte, yte = _conll2000_slice(300, 300)
    ref = sklearn_crfsuite.CRF(algorithm="l2sgd").fit(Xtr, ytr)
    ours = CRF(algorithm="l2sgd").fit(Xtr, ytr)
    losses = [r["loss"] for r in ours.training_log_]
    k = len(losses)
    assert 10 < k < 1000 and 10 < len(ref.training_log_.iterations) < 1000
    # it stopped at the first pass where the rule holds
    rel = [(losses[j - 10] - losses[j]) / losses[j] for j in range(10, k)]
    assert rel[-1] < 1e-6 and all(r >= 1e-6 for r in rel[:-1])
    best = min(r["loss"] for r in ref.training_log_.iterations)
    assert min(losses) == pytest.approx(best, rel=0.01)
    f1 = [metrics.flat_f1_score(yte, m.predict(Xte), average="weighted") for m in (ours, ref)]
    assert f1[0] == pytest.approx(f1[1], abs=0.005)
    with pytest.raises(ValueError, match="period must be an int >= 1"):
        CRF(algorithm="l2sgd", period=0).fit(Xtr[:5], ytr[:5])
    with pytest.raises(ValueError, match="calibration_rate must be a finite number > 1"):
        CRF(algorithm="l2sgd", calibration_rate=1.0).fit(Xtr[:5], ytr[:5])
    with pytest.raises(ValueError, match="does not use calibration_candidates"):
        CRF(algorithm="l2sgd", calibration_candidates=5).fit(Xtr[:5], ytr[:5])


def test_l2sgd_keeps_the_best_pass_and_takes_the_calibration():
    """The deployed weights are those of the pass with the lowest objective
    (CRFsuite's l2sgd), and the calibration arguments reach the search."""
    X, y = toy(60, seed=8)
    crf = CRF(algorithm="l2sgd", max_iterations=15, keep_training_state=True,
              calibration_eta=0.05, calibration_rate=3.0, calibration_samples=20,
              calibration_max_trials=4).fit(X, y)
    losses = [r["loss"] for r in crf.training_log_]
    best = int(np.argmin(losses))
    norm = np.sqrt(sum(w * w for w in crf.state_features_.values())
                   + sum(w * w for w in crf.transition_features_.values()))
    assert norm == pytest.approx(crf.training_log_[best]["feature_norm"], rel=1e-9)
    # the search's first candidate is calibration_eta, then by factor 3 (halved at the end)
    ratio = np.log(2 * crf.estimator_.eta0_ / 0.05) / np.log(3.0)
    assert ratio == pytest.approx(round(ratio))
    assert crf.estimator_.eta0_ != CRF(algorithm="l2sgd", max_iterations=1,
                                       keep_training_state=True).fit(X, y).estimator_.eta0_


@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow"])
def test_online_defaults_run_crfsuites_100_passes(algorithm):
    """ap / pa / arow at their defaults: CRFsuite's 100 passes (epsilon 0 never
    stops them), and a token F1 within a point of CRFsuite's."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    Xtr, ytr, Xte, yte = _conll2000_slice(200, 300)
    ref = sklearn_crfsuite.CRF(algorithm=algorithm).fit(Xtr, ytr)
    ours = CRF(algorithm=algorithm, keep_training_state=True).fit(Xtr, ytr)
    assert len(ref.training_log_.iterations) == 100 == ours.estimator_.n_iter_
    f1 = [metrics.flat_f1_score(yte, m.predict(Xte), average="weighted") for m in (ours, ref)]
    assert f1[0] == pytest.approx(f1[1], abs=0.01)


def test_default_trains_asf_28_passes_to_crfsuites_f1():
    """CRF() is ASF for 28 passes (max_iterations None), near sklearn-crfsuite's
    CRF() (L-BFGS to convergence) on a slice of CoNLL-2000."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    Xtr, ytr, Xte, yte = _conll2000_slice(400, 300)
    ref = sklearn_crfsuite.CRF().fit(Xtr, ytr)
    ours = CRF(keep_training_state=True).fit(Xtr, ytr)
    assert isinstance(ours.estimator_, ASFSequenceTagger)
    assert ours.estimator_.n_iter_ == 28 == len(ours.training_log_)
    assert ours.estimator_.feedback_average == "period"
    f1 = [metrics.flat_f1_score(yte, m.predict(Xte), average="weighted") for m in (ours, ref)]
    assert f1[0] == pytest.approx(f1[1], abs=0.005)
