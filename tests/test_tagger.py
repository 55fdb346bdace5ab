"""ASFSequenceTagger / SGDSequenceTagger: API, input forms, errors, optimality."""
import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import ClassifierMixin, clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_secondorder import ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger
from sklearn_secondorder._core._crf_infer import loglik_gradient, objective
from sklearn_secondorder._core._weights import ScaledWeights
from sklearn_secondorder.metrics import chunk_f1_score, chunk_f1_scorer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "conll2000"

TAGGERS = [
    ASFSequenceTagger,
    SGDSequenceTagger,
    lambda **kw: SGDSequenceTagger(average=True, **kw),
    PSASequenceTagger,
]


class _ASFAsClassifier(ClassifierMixin, ASFSequenceTagger):
    """Test-only: the tagger tagged as a classifier, so that scikit-learn's
    classifier checks (accuracy on blobs, classes, one label, ...) run on its
    flat (one-token-sequence) input. The shipped taggers are not tagged as
    classifiers: ``check_cv`` would pick StratifiedKFold for lists of label
    sequences, which it cannot read."""

    score = ASFSequenceTagger.score


class _SGDAsClassifier(ClassifierMixin, SGDSequenceTagger):
    score = SGDSequenceTagger.score


class _PSAAsClassifier(ClassifierMixin, PSASequenceTagger):
    score = PSASequenceTagger.score


@parametrize_with_checks([ASFSequenceTagger(max_iter=3), SGDSequenceTagger(max_iter=3),
                          SGDSequenceTagger(max_iter=3, average=True),
                          _ASFAsClassifier(max_iter=3), _SGDAsClassifier(max_iter=3),
                          PSASequenceTagger(max_iter=3), _PSAAsClassifier(max_iter=3),
                          ASFSequenceTagger(max_iter=3, n_latent=2)])
def test_sklearn_api(estimator, check):
    check(estimator)


def toy_chunks(n_seq=60, seed=0):
    """Tokens 'd' (determiner), 'n' (noun), 'v' (verb) with NP chunks in IOB2.

    A noun right after a determiner is I-NP, a noun after anything else B-NP
    (the ``prev`` attribute tells them apart).
    """
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        toks, labs = [], []
        for _ in range(rng.integers(1, 5)):
            if rng.random() < 0.5:
                toks += ["d", "n"]
                labs += ["B-NP", "I-NP"]
            else:
                toks.append("n")
                labs.append("B-NP")
            if rng.random() < 0.5:
                toks.append("v")
                labs.append("O")
        X.append([{"w": t, "prev": toks[i - 1] if i else "<s>", "bias": 1.0}
                  for i, t in enumerate(toks)])
        y.append(labs)
    return X, y


def alternating(n_seq=30):
    """Labels X Y X Y ... after a start token, other tokens all alike: only
    the transitions can tell the labels apart."""
    X, y = [], []
    for i in range(n_seq):
        T = 2 + i % 5
        X.append([{"tok": "start"}] + [{"tok": "a"}] * (T - 1))
        y.append(["X" if t % 2 == 0 else "Y" for t in range(T)])
    return X, y


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_learns_transitions(Tagger):
    X, y = alternating()
    tagger = Tagger(alpha=1e-4, max_iter=15, random_state=0).fit(X, y)
    assert tagger.predict(X) == y
    assert tagger.score(X, y) == 1.0
    tf = tagger.transition_features_
    assert tf[("X", "Y")] > tf[("X", "X")] and tf[("Y", "X")] > tf[("Y", "Y")]


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_toy_chunking_output_format(Tagger):
    X, y = toy_chunks()
    tagger = Tagger(max_iter=10, random_state=0).fit(X, y)
    pred = tagger.predict(X)
    assert isinstance(pred, list) and [len(p) for p in pred] == [len(s) for s in y]
    assert all(isinstance(lab, str) for p in pred for lab in p)
    assert chunk_f1_score(y, pred) == 1.0
    assert_array_equal(tagger.classes_, ["B-NP", "I-NP", "O"])
    marg = tagger.predict_marginals(X)
    for seq, mseq in zip(pred, marg):
        for lab, m in zip(seq, mseq):
            assert set(m) == {"B-NP", "I-NP", "O"}
            assert_allclose(sum(m.values()), 1.0)
            assert max(m, key=m.get) == lab
    assert tagger.predict_single(X[0]) == pred[0]
    sf = tagger.state_features_
    assert sf[("w:d", "B-NP")] > 0 and sf[("w:v", "O")] > 0
    assert ("bias", "O") in sf
    W = tagger.coef_
    assert W.shape == (3, len(tagger.attributes_))
    j = tagger.attributes_.index("w:n")
    assert_allclose(sf[("w:n", "I-NP")], W[1, j])
    assert len(tagger.transition_features_) == 9


def numeric_copy(X, n_features):
    """Feature dicts with keys f0..f{k} in column order -> per-sequence arrays."""
    return [np.array([[tok.get(f"f{j}", 0.0) for j in range(n_features)] for tok in seq])
            for seq in X]


def test_dicts_arrays_and_sparse_give_the_same_model():
    rng = np.random.default_rng(0)
    X_dicts, y = [], []
    for _ in range(20):
        T = rng.integers(1, 6)
        X_dicts.append([{f"f{j}": float(rng.normal()) for j in range(4)} for _ in range(T)])
        y.append([["a", "b"][int(tok["f0"] > 0)] for tok in X_dicts[-1]])
    X_arr = numeric_copy(X_dicts, 4)
    X_sp = [sp.csr_matrix(a) for a in X_arr]
    models = [ASFSequenceTagger(max_iter=4, random_state=1).fit(X, y)
              for X in (X_dicts, X_arr, X_sp)]
    for m in models[1:]:
        assert_allclose(m.coef_, models[0].coef_, rtol=1e-12)
        assert_allclose(m.intercept_, models[0].intercept_, rtol=1e-12)
    assert models[1].predict(X_arr) == models[0].predict(X_dicts)
    assert models[1].n_features_in_ == 4
    assert not hasattr(models[0], "n_features_in_")


def test_flat_input_is_one_token_sequences():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, "p", "n")
    flat = ASFSequenceTagger(max_iter=4, random_state=0).fit(X, y)
    seq = ASFSequenceTagger(max_iter=4, random_state=0).fit([r[None, :] for r in X],
                                                           [[v] for v in y])
    assert_allclose(flat.coef_, seq.coef_, rtol=1e-12)
    pred = flat.predict(X)
    assert isinstance(pred, np.ndarray) and pred.shape == (40,)
    assert flat.score(X, y) > 0.9
    # one-token sequences never use the transitions
    assert all(v == 0.0 for v in flat.transition_features_.values())


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_partial_fit_k_times_equals_fit(Tagger):
    X, y = toy_chunks(30)
    fitted = Tagger(max_iter=4, random_state=3).fit(X, y)
    inc = Tagger(max_iter=4, random_state=3)
    for _ in range(4):
        inc.partial_fit(X, y, classes=["B-NP", "I-NP", "O"])
    assert_allclose(inc.coef_, fitted.coef_, rtol=1e-12)
    assert inc.t_ == fitted.t_ == 4 * 30
    assert fitted.n_iter_ == 4 and inc.n_iter_ == 1


def test_psa_parameters_and_state():
    X, y = toy_chunks(30)
    with pytest.raises(ValueError, match="psa_beta=0.99 must be smaller"):
        PSASequenceTagger(psa_alpha=0.99, psa_beta=0.99).fit(X, y)
    psa = PSASequenceTagger(period=2, max_iter=2, random_state=0).fit(X, y)
    eta = psa.step_sizes_
    assert eta.shape == psa._model.shape
    eta0 = float(np.float32(0.1))                 # (the step sizes are float32)
    assert np.all(eta <= eta0) and np.any(eta < eta0)
    # untouched weights (here: none exist beyond the data) and the bias adapt
    n_windows = psa.t_ // 4
    assert np.all(eta >= 0.1 * 0.99 ** n_windows * (1 - 1e-6))
    # growth: a new attribute starts at eta0 and is learned
    psa.partial_fit([[{"w": "zz", "prev": "<s>", "bias": 1.0}]] * 3, [["O"]] * 3)
    j = psa.attributes_.index("w:zz")
    L = psa.classes_.size
    assert psa.state_features_[("w:zz", "O")] > 0
    assert np.all(psa.step_sizes_[j * L:(j + 1) * L] <= eta0)


def test_asf_feedback_points():
    X, y = toy_chunks(10)
    assert ASFSequenceTagger(max_iter=7, random_state=0).fit(X, y).feedback_passes_ == [1, 3, 6]
    inc = ASFSequenceTagger(random_state=0)
    for _ in range(11):
        inc.partial_fit(X, y, classes=["B-NP", "I-NP", "O"])
    assert inc.feedback_passes_ == [1, 3, 6, 10]


def test_partial_fit_learns_new_attributes():
    X1 = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]] * 5
    y1 = [["D", "N"], ["D", "N"]] * 5
    X2 = [[{"w": "the"}, {"w": "runs"}], [{"w": "runs"}]] * 5
    y2 = [["D", "V"], ["V"]] * 5
    tagger = ASFSequenceTagger(eta0=0.5, random_state=0)
    tagger.partial_fit(X1, y1, classes=["D", "N", "V"])
    assert "w:runs" not in tagger.vocabulary_
    for _ in range(5):
        tagger.partial_fit(X2, y2)
        tagger.partial_fit(X1, y1)
    assert tagger.vocabulary_["w:runs"] == 4
    assert tagger.state_features_[("w:runs", "V")] > 0
    assert tagger.predict([[{"w": "runs"}]]) == [["V"]]
    assert tagger.predict([[{"w": "the"}, {"w": "cat"}]]) == [["D", "N"]]
    # unseen attributes at prediction time are ignored
    assert tagger.predict([[{"w": "unknown"}, {"w": "runs"}]])[0][1] == "V"


def test_value_types():
    X = [[{"w": "x", "up": True, "n": 2, "f": 0.5}, {"w": "y", "up": False, "n": 1, "f": -1.0}]]
    tagger = SGDSequenceTagger(max_iter=2, random_state=0).fit(X, [["A", "B"]])
    assert set(tagger.attributes_) == {"w:x", "up", "n", "f", "w:y"}
    with pytest.raises(TypeError, match="values must be str, bytes, float, int, bool"):
        tagger.fit([[{"w": None}]], [["A"]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        tagger.fit([[{"f": np.nan}]], [["A"]])


@pytest.mark.parametrize("X,y,err,match", [
    ([], [], ValueError, "X is empty"),
    ([[]], [[]], ValueError, "sequence 0 of X is empty"),
    ([[{"a": 1}], []], [["A"], []], ValueError, "sequence 1 of X is empty"),
    ([[{"a": 1}, {"a": 2}]], [["A"]], ValueError, "2 tokens in X but 1 labels"),
    ([[{"a": 1}], [{"a": 1}]], [["A"]], ValueError, "2 sequences but y has 1"),
    ([[{"a": 1}]], None, ValueError, "requires y"),
    ([{"a": 1}], [["A"]], TypeError, "single sequence of feature dicts"),
    ([[{"a": 1}], "ab"], [["A"], ["B"]], TypeError, "expected a list of feature dicts"),
    ([np.ones((2, 3)), np.ones((1, 2))], [["A", "A"], ["B"]], ValueError, "2 features, but 3"),
    ([np.ones((2, 3)), np.ones((0, 3))], [["A", "A"], []], ValueError, "sequence 1 of X is empty"),
    ([[{"a": 1}]], ["A"], TypeError, "expected a list of labels"),
])
def test_input_errors(X, y, err, match):
    with pytest.raises(err, match=match):
        ASFSequenceTagger().fit(X, y)


def test_partial_fit_errors():
    X, y = toy_chunks(5)
    tagger = ASFSequenceTagger().partial_fit(X[:1], y[:1])  # classes from the batch
    assert_array_equal(tagger.classes_, np.unique(y[0]))
    tagger = ASFSequenceTagger()
    tagger.partial_fit(X, y, classes=["B-NP", "I-NP", "O"])
    with pytest.raises(ValueError, match="labels not in classes"):
        tagger.partial_fit(X, [["NEW"] * len(s) for s in y])
    with pytest.raises(ValueError, match="is not the same as on the first call"):
        tagger.partial_fit(X, y, classes=["B-NP", "O"])
    with pytest.raises(ValueError, match="cannot be mixed"):
        tagger.predict([np.ones((2, 2))])


def test_divergence_raises():
    X = [[{"x": 1e200}, {"x": -1e200}]] * 4
    y = [["A", "B"]] * 4
    with pytest.raises(ValueError, match="overflowed"):
        ASFSequenceTagger(alpha=0.0, eta0=1e100, random_state=0).fit(X, y)


def test_unfitted():
    from sklearn.exceptions import NotFittedError
    tagger = ASFSequenceTagger()
    with pytest.raises(NotFittedError):
        tagger.predict([[{"a": 1}]])
    with pytest.raises(NotFittedError):
        _ = tagger.state_features_
    assert not hasattr(tagger, "transition_features_")


def test_pickle_roundtrip_and_continue():
    X, y = toy_chunks(20)
    tagger = ASFSequenceTagger(max_iter=3, random_state=0).fit(X, y)
    clone_ = pickle.loads(pickle.dumps(tagger))
    assert clone_.predict(X) == tagger.predict(X)
    assert clone_.state_features_ == tagger.state_features_
    tagger.partial_fit(X, y)
    clone_.partial_fit(X, y)
    assert_allclose(clone_.coef_, tagger.coef_)


def test_grid_search_over_sequences_with_f1():
    X, y = toy_chunks(45)
    grid = GridSearchCV(ASFSequenceTagger(max_iter=5, random_state=0),
                        {"alpha": [1e-4, 10.0]}, scoring=chunk_f1_scorer, cv=3)
    grid.fit(X, y)
    assert grid.best_params_ == {"alpha": 1e-4}
    assert grid.best_score_ == 1.0
    # a huge L2 penalty flattens the model: F1 drops
    assert grid.cv_results_["mean_test_score"][1] < 0.9
    scores = cross_val_score(SGDSequenceTagger(max_iter=5, random_state=0), X, y,
                             cv=KFold(3), scoring=chunk_f1_scorer)
    assert scores.shape == (3,) and np.all(scores > 0.9)
    assert clone(grid.best_estimator_).get_params()["alpha"] == 1e-4


def test_reaches_the_crfsuite_lbfgs_optimum():
    """ASF converges to the optimum of the same objective as CRFsuite L-BFGS.

    CRFsuite minimises ``-sum log p + c2 ||w||^2``; ours is
    ``alpha/2 ||w||^2 + mean -log p``, so ``c2 = alpha n / 2``. With all
    possible states and transitions and no bias the two models have the same
    parameters: CRFsuite's solution must have (near) zero gradient under our
    objective, and ASF must reach (nearly) its objective value.
    """
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = toy_chunks(80, seed=1)
    X = [[{"w": tok["w"], "noise": float(i % 3)} for i, tok in enumerate(s)] for s in X]
    y = [["O" if lab == "O" else "NP" for lab in s] for s in y]
    alpha = 0.05
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=alpha * len(X) / 2, max_iterations=500,
                               epsilon=1e-9, all_possible_states=True,
                               all_possible_transitions=True)
    crf.fit(X, y)
    ours = ASFSequenceTagger(alpha=alpha, max_iter=45, fit_intercept=False,
                             random_state=0).fit(X, y)
    # CRFsuite's weights in our flat layout
    attrs, labels = ours.attributes_, ours.classes_.tolist()
    A, L = len(attrs), len(labels)
    flat = np.zeros((A + L + 1) * L)
    for (attr, lab), coef in crf.state_features_.items():
        flat[attrs.index(attr) * L + labels.index(lab)] = coef
    for (a, b), coef in crf.transition_features_.items():
        flat[A * L + labels.index(a) * L + labels.index(b)] = coef
    st = ours._state
    batch = ours._to_data(X, y, fitting=True)
    lab_idx = np.searchsorted(ours.classes_, batch.labels).astype(np.int32)
    ds = batch.sequence_data(A, lab_idx)
    _, grad = loglik_gradient(ds, ScaledWeights(flat.copy(), L), fit_intercept=False)
    full_grad = alpha * flat - grad / len(X)
    full_grad[-L:] = 0.0  # no bias
    assert np.abs(full_grad).max() < 1e-4
    f_crfsuite = objective(ds, ScaledWeights(flat.copy(), L), alpha)
    f_ours = objective(ds, ScaledWeights(ours._model.copy(), L), alpha)
    assert f_ours >= f_crfsuite - 1e-9
    assert f_ours - f_crfsuite < 1e-3 * f_crfsuite
    assert st.crf.n_attributes == A


def load_conll(path, n):
    with gzip.open(path, "rt") as f:
        blocks = f.read().strip().split("\n\n")[:n]
    return [[line.split() for line in b.splitlines()] for b in blocks]


def conll_features(sent):
    words = [t[0] for t in sent]
    pos = [t[1] for t in sent]
    n = len(sent)
    feats = []
    for i in range(n):
        d = {"w": words[i].lower(), "p": pos[i]}
        for k in (-1, 1):
            if 0 <= i + k < n:
                d[f"w[{k}]"] = words[i + k].lower()
                d[f"p[{k}]"] = pos[i + k]
        feats.append(d)
    return feats


@pytest.mark.skipif(not DATA.is_dir(), reason=f"CoNLL-2000 data not found at {DATA}")
def test_conll2000_subset():
    train = load_conll(DATA / "train.txt.gz", 1500)
    test = load_conll(DATA / "test.txt.gz", 400)
    Xtr, ytr = [conll_features(s) for s in train], [[t[2] for t in s] for s in train]
    Xte, yte = [conll_features(s) for s in test], [[t[2] for t in s] for s in test]
    asf = ASFSequenceTagger(alpha=2.0 / len(Xtr), max_iter=3, random_state=0).fit(Xtr, ytr)
    f1 = chunk_f1_score(yte, asf.predict(Xte))
    assert f1 > 0.85
    assert asf.score(Xte, yte) > 0.9


def test_latent_states_count_what_labels_cannot():
    """Labels A A B A A B ... on identical tokens: a first-order CRF over the
    labels cannot count, two hidden states per label can (DPLVM)."""
    X, y = [], []
    for i in range(40):
        T = 3 + i % 9
        X.append([{"tok": "start"}] + [{"tok": "a"}] * (T - 1))
        y.append(["B" if t % 3 == 2 else "A" for t in range(T)])
    plain = ASFSequenceTagger(max_iter=30, random_state=0).fit(X, y)
    latent = ASFSequenceTagger(n_latent=2, max_iter=30, random_state=0).fit(X, y)
    assert plain.score(X, y) < 0.6
    assert latent.score(X, y) == 1.0
    assert latent.coef_.shape == (4, 2)
    assert ("A", 1) in {k[1] for k in latent.state_features_}
    assert len(latent.transition_features_) == 16
    # marginals are exact label marginals (hidden states summed)
    for seq in latent.predict_marginals(X[:5]):
        for m in seq:
            assert set(m) == {"A", "B"}
            assert_allclose(sum(m.values()), 1.0)


@pytest.mark.parametrize("averaged", [False, True])
def test_eta0_calibration_follows_bottous_recipe(averaged):
    """Doubling from 0.1 while the objective after a constant-step trial pass
    improves (else halving), best candidate halved; checked against the
    objectives of the candidates computed independently."""
    from sklearn_secondorder._calibration import calibrate_crf_eta0
    from sklearn_secondorder._core._crf_sgd import CRFSGDOptions, CRFState, sgd_epochs
    X, y = toy_chunks(40, seed=3)
    tagger = ASFSequenceTagger(max_iter=1, random_state=0).fit(X, y)
    batch = tagger._to_data(X, y, fitting=True)
    A, L = len(tagger.attributes_), tagger.classes_.size
    lab = np.searchsorted(tagger.classes_, batch.labels).astype(np.int32)
    ds = batch.sequence_data(A, lab)
    alpha = 1e-3

    def obj(eta):
        v = np.zeros((A + L + 1) * L)
        state = CRFState(coef=v, avg=np.zeros_like(v) if averaged else None, n_states=L)
        options = CRFSGDOptions(eta0=eta, lam=alpha, average=averaged)
        if sgd_epochs(ds, state, options, shuffle=False).diverged:
            return np.inf
        flat = state.model() if averaged else state.coef
        return objective(ds, ScaledWeights(flat, L), alpha)

    grid = {k: obj(0.1 * 2.0 ** k) for k in range(-8, 9)}
    k = 0
    if grid[1] < grid[0]:
        while grid[k + 1] < grid[k]:
            k += 1
    else:
        while grid[k - 1] < grid[k]:
            k -= 1
    eta = calibrate_crf_eta0(ds, np.zeros((A + L + 1) * L), n_states=L, n_latent=1,
                             lam=alpha, fit_intercept=True, averaged=averaged)
    assert_allclose(eta, 0.1 * 2.0 ** k / 2)



@pytest.mark.parametrize("with_mask", [False, True])
def test_eta0_trials_on_the_sample_attributes_are_the_full_models(with_mask):
    """The calibration's trials on a sample restricted to its attributes
    (``sample_attributes``) give the full model's objectives: the same eta0,
    and the same objective to rounding for a candidate; with weights outside
    the sample not all 0 (latent states' random start) nothing is
    restricted."""
    from sklearn_secondorder._calibration import calibrate_crf_eta0, sample_attributes
    from sklearn_secondorder._core._crf_sgd import CRFSGDOptions, CRFState, sgd_epochs
    rng = np.random.default_rng(4)
    X = [[{"w": f"w{rng.integers(80)}", "b": "x"} for _ in range(rng.integers(2, 6))]
         for _ in range(60)]
    y = [["N" if int(tok["w"][1:]) % 3 else "V" for tok in seq] for seq in X]
    tagger = ASFSequenceTagger(max_iter=1, random_state=0).fit(X, y)
    batch = tagger._to_data(X, y, fitting=True)
    A, L = len(tagger.attributes_), tagger.classes_.size
    lab = np.searchsorted(tagger.classes_, batch.labels).astype(np.int32)
    sample, sample_lab = batch.sample(np.arange(0, 60, 4), lab)
    coef = np.zeros((A + L + 1) * L)
    allowed = (rng.random(coef.size) < 0.5).astype(np.uint8) if with_mask else None
    X_used, coef_used, allowed_used, n_used = sample_attributes(
        sample.tokens(), coef, allowed, A, L)
    assert n_used == np.unique(sample.indices[sample.indices < A]).size < A
    assert coef_used.size == (n_used + L + 1) * L
    full = sample.sequence_data(A, sample_lab)
    used = sample.with_tokens(X_used).sequence_data(n_used, sample_lab)
    kw = dict(n_states=L, n_latent=1, lam=1e-3, fit_intercept=True, averaged=True)
    assert (calibrate_crf_eta0(used, coef_used, allowed=allowed_used, **kw)
            == calibrate_crf_eta0(full, coef, allowed=allowed, **kw))
    for ds, w in ((full, coef), (used, coef_used)):
        state = CRFState(coef=w.copy(), avg=np.zeros_like(w), n_states=L)
        sgd_epochs(ds, state, CRFSGDOptions(eta0=0.2, lam=1e-3, average=True), shuffle=False)
        if ds is full:
            ref = objective(ds, ScaledWeights(state.model(), L), 1e-3)
        else:
            assert_allclose(objective(ds, ScaledWeights(state.model(), L), 1e-3), ref,
                            rtol=1e-12)
    # a non-zero weight outside the sample: kept whole
    outside = np.setdiff1d(np.arange(A), sample.indices)[0]
    coef[outside * L] = 0.5
    assert sample_attributes(sample.tokens(), coef, allowed, A, L)[3] == A

# ---- failed calls leave no half-updated model -------------------------------------
TINY_X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
TINY_Y = [["D", "N"], ["D", "N"]]
TAGGERS = [ASFSequenceTagger, SGDSequenceTagger, PSASequenceTagger]


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_a_failed_fit_leaves_the_tagger_unfitted(Tagger):
    from sklearn.exceptions import NotFittedError
    tagger = Tagger(random_state=0).fit(TINY_X, TINY_Y)
    with pytest.raises(ValueError, match="empty"):
        tagger.fit([[]], [[]])
    with pytest.raises(NotFittedError):
        tagger.predict(TINY_X)
    with pytest.raises(ValueError, match="only one class"):
        Tagger().fit(TINY_X, [["N", "N"], ["N", "N"]])
    with pytest.raises(ValueError, match="mixes string labels"):
        Tagger().fit(TINY_X, [[0, "N"], [0, "N"]])


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_a_refused_partial_fit_keeps_the_vocabulary(Tagger):
    tagger = Tagger(random_state=0).partial_fit(TINY_X, TINY_Y)
    vocab = dict(tagger.vocabulary_)
    new_words = [[{"w": f"new{i}"}, {"w": "x"}] for i in range(50)]
    with pytest.raises(ValueError, match="labels not in classes_"):
        tagger.partial_fit(new_words, [["D", "V"]] * 50)
    with pytest.raises(ValueError, match="labels in y"):
        tagger.partial_fit(new_words, [["D"]] * 50)
    assert tagger.vocabulary_ == vocab
    assert len(tagger.attributes_) == tagger.coef_.shape[1]
    tagger.partial_fit(new_words, [["D", "N"]] * 50)       # a good batch still works
    assert len(tagger.vocabulary_) > len(vocab)


@pytest.mark.parametrize("Tagger", [ASFSequenceTagger, SGDSequenceTagger])
def test_a_diverged_partial_fit_leaves_the_tagger_unfitted(Tagger):
    from sklearn.exceptions import NotFittedError
    tagger = Tagger(random_state=0, eta0=0.1).fit(TINY_X, TINY_Y)
    huge = [[{"w": "the", "x": 1e300}, {"x": -1e300}]] * 3
    with pytest.raises(ValueError, match="overflowed.*now unfitted"):
        tagger.partial_fit(huge, [["D", "N"]] * 3)
    with pytest.raises(NotFittedError):
        tagger.predict(TINY_X)


def test_prediction_refuses_overflowing_token_scores():
    """Feature values that overflow the scores give an error, not an arbitrary path."""
    tagger = SGDSequenceTagger(random_state=0).fit([[{"x": 1.0}, {"x": -1.0}]] * 3,
                                                   [["D", "N"]] * 3)
    assert tagger.predict([[{"x": 1.0}, {"x": -1.0}]]) == [["D", "N"]]
    huge = [[{"x": 1.0}, {"x": -1.0}], [{"x": 1e308}, {"x": -1e308}]]
    with pytest.raises(ValueError, match="non-finite token scores in sequence 1"):
        tagger.predict(huge)
    with pytest.raises(ValueError, match="feature values"):
        tagger.predict_marginals(huge)


@pytest.mark.parametrize("X, message", [
    ([[b"a", {"w": "b"}]], "token 0 of sequence 0 is a bytes"),   # (a str token is valid)
    ([[("w", 1.0), ("w", "b")]], "feature name 1.0 is a float"),
    (["ab"], "sequence 0 of X is a str"),
    ((s for s in [[{"w": "a"}]]), "X is a generator")])
def test_malformed_sequences_are_named(X, message):
    with pytest.raises(TypeError, match=message):
        ASFSequenceTagger().fit(X, [["D", "N"]])


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_a_later_partial_fit_checks_parameters_before_changing_anything(Tagger):
    tagger = Tagger(random_state=0).partial_fit(TINY_X, TINY_Y)
    model = tagger.coef_.copy()
    tagger.set_params(alpha=2.0 / tagger.eta0_)
    with pytest.raises(ValueError, match=r"eta0 \* alpha < 1"):
        tagger.partial_fit(TINY_X, TINY_Y)
    assert_array_equal(tagger.coef_, model)               # still fitted, unchanged
    if Tagger is PSASequenceTagger:
        tagger.set_params(alpha=1e-4, psa_alpha=0.99, psa_beta=0.9999)
        with pytest.raises(ValueError, match="psa_beta"):
            tagger.partial_fit(TINY_X, TINY_Y)
        assert_array_equal(tagger.coef_, model)


# scikit-learn's type_of_target casts the NaN label to int while checking it
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("classes, message", [
    (["D", "N", np.nan], "mixes string labels"), ([0, 1, np.nan], "NaN"),
    ([0, 1, 2.5], "continuous"), ([["D", "N"], ["V", "O"]], "1d array")])
def test_partial_fit_checks_the_classes_argument(classes, message):
    with pytest.raises(ValueError, match=message):
        ASFSequenceTagger().partial_fit(TINY_X, TINY_Y, classes=classes)


def test_implausibly_large_tagger_weights_warn():
    """alpha/2 ||w||^2 far above the cost of w = 0 (T log H per sequence)."""
    import warnings
    rng = np.random.RandomState(0)
    X = rng.randn(300, 4)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    with pytest.warns(UserWarning, match="implausibly large"):
        PSASequenceTagger(random_state=0).fit(X * 1e5, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for Tagger in TAGGERS:
            Tagger(random_state=0).fit(X, y)
            Tagger(random_state=0).fit(TINY_X * 5, TINY_Y * 5)


def test_asf_period_average_converges_faster_on_rare_features():
    """Labels carried by rare features (each 'name' in about 2% of the
    sentences): after 10 passes with the same step, ASF feeding back the
    period's average is at most half as far from the optimum (L-BFGS to
    convergence, the same objective) as with the average of all iterates,
    which lags the drifting rare weights."""
    from _oracles import to_data

    from sklearn_secondorder import LBFGSSequenceTagger

    rng = np.random.default_rng(0)
    n, L, n_rare, n_freq = 600, 3, 300, 10
    Xs, ys = [], []
    for _ in range(n):
        rows, lab = [], []
        for _ in range(rng.integers(3, 8)):
            r = np.zeros(n_rare + n_freq)
            name = rng.integers(n_rare)
            r[name] = 1.0
            r[n_rare + rng.integers(n_freq, size=2)] += 1.0
            rows.append(r)
            lab.append(int(name % L if rng.random() < 0.9 else rng.integers(L)))
        Xs.append(sp.csr_matrix(np.array(rows)))
        ys.append(lab)
    alpha = 2.0 / n                       # CRFsuite's c2 = 1
    offsets = np.concatenate([[0], np.cumsum([x.shape[0] for x in Xs])]).astype(np.int64)
    ds = to_data(sp.vstack(Xs).tocsr(), offsets, np.concatenate(ys).astype(np.int32))

    def obj(tagger):
        return objective(ds, ScaledWeights(tagger.flat_weights_.copy(), L), alpha, 1)

    best = obj(LBFGSSequenceTagger(alpha=alpha, epsilon=1e-8, max_iter=1000,
                                   all_possible_states=True,
                                   all_possible_transitions=True).fit(Xs, ys))
    gap = {fa: obj(ASFSequenceTagger(alpha=alpha, eta0=0.05, max_iter=10, random_state=0,
                                     feedback_average=fa).fit(Xs, ys)) - best
           for fa in ("period", "all")}
    assert 0 < gap["period"] < 0.5 * gap["all"]
