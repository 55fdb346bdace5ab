"""The estimators' extension protocol and the layers built on it.

The Dask mixing (``sklearn_secondorder/dask``) and the sklearn-crfsuite facade
(``sklearn_secondorder/crfsuite``) drive the estimators through public methods
only: ``start_model``, ``fit_batch``, ``partial_fit_batch``,
``flat_weights_``, ``n_attributes_``, ``pass_losses_``,
``rebuild_exported_arrays`` / ``drop_exported_arrays`` and SBM's
``rank_for``. The first test reads the two packages' source and fails on any
private attribute they touch; the others check that each method does what
the private steps it wraps do inside ``fit`` / ``partial_fit``.
"""
import ast
import copy
import pathlib

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

import sklearn_secondorder
from sklearn_secondorder import (
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    LBFGSSequenceTagger,
    PSAClassifier,
    PSASequenceTagger,
    SBMLogisticRegression,
    SGDQNLinearSVC,
    SGDSequenceTagger,
)
from sklearn_secondorder.sequence._input import read_sequences

PACKAGE = pathlib.Path(sklearn_secondorder.__file__).parent

# ---- no private attribute in the layers -------------------------------------------
#: ``x._name`` allowed in the two layers when ``x`` is one of these: the
#: object's own attributes (an instance's or a class's).
OWN = {"self", "cls"}
#: Explicit exceptions ``(file, expression)``: none is needed.
ALLOWED = set()
_BY_NAME = {"getattr", "hasattr", "setattr", "delattr"}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owner(node):
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def private_accesses(source):
    """The private attributes ``source`` reads or writes on objects other than
    its own, and its imports of the compiled core: a list of
    ``(line, expression)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr) \
                and _owner(node.value) not in OWN:
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            f, args = node.func, node.args
            # getattr(x, "_name"), vars(x).pop("_name"), x.__dict__.get("_name")
            by_name = isinstance(f, ast.Name) and f.id in _BY_NAME and len(args) >= 2
            in_dict = (isinstance(f, ast.Attribute) and f.attr in ("pop", "get", "setdefault")
                       and args and (
                           (isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name)
                            and f.value.func.id == "vars" and f.value.args
                            and _owner(f.value.args[0]) not in OWN)
                           or (isinstance(f.value, ast.Attribute)
                               and f.value.attr == "__dict__"
                               and _owner(f.value.value) not in OWN)))
            key = args[1] if by_name else args[0] if in_dict else None
            target = args[0] if by_name else None
            if key is not None and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str) and _private(key.value) \
                    and (target is None or _owner(target) not in OWN):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            if "_core" in (node.module or "").split("."):
                found.append((node.lineno, f"from {'.' * node.level}{node.module} import"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if "_core" in a.name.split(".")]
    return found


def test_private_access_scanner_finds_what_the_layers_used_to_do():
    # the forms the two layers used before the protocol, each caught
    before = '''
from .._core._crf_sgd import CRFState
import sklearn_secondorder._core._weights
def start(model, tagger, rng):
    model._new_state(3, rng)
    model._model = model._final_flat()
    n = tagger._state.crf.n_attributes
    kind = getattr(model, "_kind", None)
    if hasattr(model, "_states"):
        vars(model).pop("_model", None)
'''
    lines = [line for line, _ in private_accesses(before)]
    assert sorted(set(lines)) == [2, 3, 5, 6, 7, 8, 9, 10]
    # an object's own attributes, dunders and public names are not private reads
    ok = '''
class A:
    def f(self, other):
        self._x = other.coef_
        self.__dict__.pop("_cache", None)
        return cls._build(type(other).__name__, vars(self).get("_y"), getattr(self, "_z"))
'''
    assert private_accesses(ok) == []


@pytest.mark.parametrize("layer", ["dask", "crfsuite"])
def test_layers_read_no_private_attribute_and_import_no_core(layer):
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files
    bad = [f"{f.relative_to(PACKAGE)}:{line}: {expr}"
           for f in files for line, expr in private_accesses(f.read_text())
           if (f.name, expr) not in ALLOWED]
    assert not bad, "private access outside the estimators:\n" + "\n".join(bad)


# ---- the taggers' protocol --------------------------------------------------------
def toy(n=40, seed=0):
    """Chunk-like sequences of feature dicts (string and numeric values)."""
    rng = np.random.RandomState(seed)
    words = {"D": ["the", "a"], "N": ["dog", "cat", "idea"], "V": ["runs", "sees"]}
    X, y = [], []
    for _ in range(n):
        labs = ["D", "N", "V", "D", "N"][: rng.randint(2, 6)]
        X.append([{"w": words[lab][rng.randint(len(words[lab]))], "len": rng.rand(),
                   "first": float(i == 0)} for i, lab in enumerate(labs)])
        y.append(labs)
    return X, y


TAGGERS = {
    "sgd": lambda: SGDSequenceTagger(eta0=0.05, alpha=1e-3, random_state=0, max_iter=3),
    "asgd": lambda: SGDSequenceTagger(eta0=0.05, average=True, random_state=1, max_iter=3),
    "psa": lambda: PSASequenceTagger(eta0=0.05, random_state=2, max_iter=3),
    "asf": lambda: ASFSequenceTagger(eta0=0.05, random_state=3, max_iter=3),
    "ap": lambda: AveragedPerceptronSequenceTagger(random_state=4, max_iter=3),
}


@pytest.mark.parametrize("name", list(TAGGERS))
def test_start_model_then_passes_equal_partial_fit(name):
    # a zero start over the data's own vocabulary, continued by
    # partial_fit_batch on the batch read once, is partial_fit's first call,
    # bit for bit; the next call continues alike
    X, y = toy()
    classes = np.array(["D", "N", "V"])
    ref = TAGGERS[name]().partial_fit(X, y, classes=classes)
    vocabulary = dict(ref.vocabulary_)
    est = TAGGERS[name]().start_model(classes, vocabulary=vocabulary)
    assert est.t_ == 0 and est.n_iter_ == 0 and est.n_attributes_ == len(vocabulary)
    assert not np.any(est.flat_weights_)
    assert est.vocabulary_ == vocabulary and est.vocabulary_ is not vocabulary
    batch = read_sequences(est, X, y, fitting=True)
    est.partial_fit_batch(batch, n_passes=1)
    assert_array_equal(est.flat_weights_, ref.flat_weights_)
    assert est.t_ == ref.t_
    ref.partial_fit(X, y)
    est.partial_fit_batch(batch)
    assert_array_equal(est.flat_weights_, ref.flat_weights_)
    assert est.predict(X) == ref.predict(X)


def test_start_model_over_numeric_arrays():
    X, y = toy()
    rng = np.random.RandomState(0)
    Xa = [rng.rand(len(s), 4) for s in X]
    ref = TAGGERS["sgd"]().partial_fit(Xa, y)
    est = TAGGERS["sgd"]().start_model(["D", "N", "V"], n_features=4)
    assert est.n_features_in_ == 4 and est.n_attributes_ == 4
    est.partial_fit_batch(read_sequences(est, Xa, y, fitting=True))
    assert_array_equal(est.flat_weights_, ref.flat_weights_)
    # a batch of feature dicts cannot continue a model of arrays
    dicts = read_sequences(TAGGERS["sgd"](), X, y, fitting=True, first=True)
    with pytest.raises(ValueError, match="cannot be mixed"):
        est.partial_fit_batch(dicts)


def test_start_model_refusals():
    with pytest.raises(ValueError, match="exactly one of them"):
        SGDSequenceTagger(eta0=0.1).start_model(["a", "b"])
    with pytest.raises(ValueError, match="exactly one of them"):
        SGDSequenceTagger(eta0=0.1).start_model(["a", "b"], vocabulary={"x": 0}, n_features=1)
    with pytest.raises(ValueError, match="eta0='auto'"):
        SGDSequenceTagger().start_model(["a", "b"], n_features=3)
    with pytest.raises(ValueError, match="each column once"):
        SGDSequenceTagger(eta0=0.1).start_model(["a", "b"], vocabulary={"x": 0, "y": 2})
    with pytest.raises(ValueError, match="at least 2 labels"):
        SGDSequenceTagger(eta0=0.1).start_model(["a"], n_features=3)
    with pytest.raises(ValueError, match="positive integer"):
        SGDSequenceTagger(eta0=0.1).start_model(["a", "b"], n_features=0)
    # a refused start changes nothing: a fitted tagger stays as it was
    X, y = toy()
    est = TAGGERS["sgd"]().fit(X, y)
    w = est.flat_weights_
    with pytest.raises(ValueError, match="eta0 \\* alpha < 1"):
        est.set_params(alpha=20.0).start_model(["a", "b"], n_features=3)
    assert_array_equal(est.flat_weights_, w)
    assert est.classes_.tolist() == ["D", "N", "V"]


def test_partial_fit_batch_refusals():
    X, y = toy()
    est = TAGGERS["sgd"]()
    batch = read_sequences(est, X, y, fitting=True, first=True)
    with pytest.raises(NotFittedError):
        est.partial_fit_batch(batch)
    est.start_model(["D", "N"], vocabulary=est.vocabulary_)
    with pytest.raises(ValueError, match="labels not in classes_.*'V'"):
        est.partial_fit_batch(batch)
    est = LBFGSSequenceTagger(max_iter=2).fit(X, y)
    with pytest.raises(TypeError, match="no partial_fit"):
        est.partial_fit_batch(batch)


@pytest.mark.parametrize("name", ["sgd", "psa", "ap"])
def test_fit_batch_is_fit_on_the_batch(name):
    X, y = toy(seed=1)
    ref = TAGGERS[name]().fit(X, y)
    est = TAGGERS[name]()
    batch = read_sequences(est, X, y, fitting=True, first=True)
    est.fit_batch(batch, n_passes=est.max_iter)
    assert_array_equal(est.flat_weights_, ref.flat_weights_)
    assert est.n_iter_ == ref.n_iter_ and est.t_ == ref.t_
    assert est.pass_seconds_ and len(est.pass_seconds_) == len(ref.pass_seconds_)
    assert est.predict(X) == ref.predict(X)


def test_fit_batch_callback_and_allowed():
    X, y = toy(seed=2)
    est = TAGGERS["sgd"]()
    batch = read_sequences(est, X, y, fitting=True, first=True)
    seen = []

    def on_pass(t):
        # the weights, counters and losses are those of the pass just run
        seen.append((t.flat_weights_, t.t_, t.n_iter_, list(t.pass_losses_)))
        return len(seen) == 2              # stop after the second pass

    est.fit_batch(batch, n_passes=5, callback=on_pass)
    assert [s[2] for s in seen] == [1, 2] and est.n_iter_ == 2
    assert_array_equal(seen[-1][0], est.flat_weights_)
    assert [len(s[3]) for s in seen] == [1, 2]
    # two passes one at a time are partial_fit's two calls
    ref = TAGGERS["sgd"]().set_params(max_iter=1).fit(X, y).partial_fit(X, y)
    assert_allclose(est.flat_weights_, ref.flat_weights_, rtol=1e-12)
    assert seen[0][1] < seen[1][1] == est.t_ == ref.t_
    assert_allclose(est.pass_losses_, ref.pass_losses_, rtol=1e-12)
    # a mask keeps the weights it excludes at zero and trains the others
    n = est.flat_weights_.size
    allowed = np.ones(n, np.uint8)
    allowed[: n // 3] = 0
    est.fit_batch(batch, n_passes=2, allowed=allowed)
    w = est.flat_weights_
    assert not np.any(w[allowed == 0]) and np.any(w[allowed == 1])
    assert np.any(ref.flat_weights_[: n // 3])


def test_fit_batch_refusals():
    X, y = toy()
    batch = read_sequences(SGDSequenceTagger(), X, y, fitting=True, first=True)
    with pytest.raises(ValueError, match="not read by this tagger"):
        SGDSequenceTagger(eta0=0.1).fit_batch(batch, n_passes=1)
    ap = AveragedPerceptronSequenceTagger()
    batch = read_sequences(ap, X, y, fitting=True, first=True)
    with pytest.raises(TypeError, match="no allowed mask and no per-pass callback"):
        ap.fit_batch(batch, n_passes=1, callback=lambda t: False)
    with pytest.raises(ValueError, match="n_passes must be a positive integer"):
        ap.fit_batch(batch, n_passes=0)


def test_tagger_properties_and_exported_weights():
    X, y = toy(seed=3)
    est = TAGGERS["psa"]()
    with pytest.raises(NotFittedError):
        _ = est.flat_weights_
    est.fit(X, y)
    A, H = est.n_attributes_, est.classes_.size
    assert A == len(est.vocabulary_) == len(est.attributes_)
    w = est.flat_weights_
    assert w.shape == ((A + H + 1) * H,)
    assert_array_equal(w[: A * H].reshape(A, H).T, est.coef_)
    assert_array_equal(w[-H:], est.intercept_)
    w[:] = 0.0                                    # a copy: the model is unchanged
    assert np.any(est.flat_weights_)
    assert len(est.pass_losses_) == 1             # fit's passes: one kernel call
    assert np.all(np.isfinite(est.pass_losses_))
    # dropped, the model cannot predict; rebuilt, it predicts as before
    pred = est.predict(X)
    slim = copy.deepcopy(est).drop_exported_arrays()
    with pytest.raises(AttributeError):
        slim.predict(X)
    assert slim.rebuild_exported_arrays().predict(X) == pred
    assert_array_equal(slim.flat_weights_, est.flat_weights_)
    assert SGDSequenceTagger().drop_exported_arrays().get_params() == \
        SGDSequenceTagger().get_params()
    with pytest.raises(NotFittedError):
        SGDSequenceTagger().rebuild_exported_arrays()


# ---- the linear models' protocol --------------------------------------------------
def test_linear_exported_arrays_round_trip():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 5)
    y = (X[:, 0] + 0.3 * rng.randn(200) > 0).astype(int)
    for est, extra in ((PSAClassifier(random_state=0, max_iter=2), "eta_"),
                       (SGDQNLinearSVC(random_state=0, max_iter=2), "B_")):
        est.fit(X, y)
        before = {k: getattr(est, k).copy() for k in ("coef_", "intercept_", extra)}
        est.drop_exported_arrays()
        assert not any(hasattr(est, k) for k in before)
        with pytest.raises(AttributeError, match="coef_"):
            est.predict(X)
        est.rebuild_exported_arrays()
        for k, v in before.items():
            assert_array_equal(getattr(est, k), v)
    # no state to rebuild from: unfitted, or stripped for deployment
    assert PSAClassifier().drop_exported_arrays().get_params() == PSAClassifier().get_params()
    with pytest.raises(NotFittedError):
        PSAClassifier().rebuild_exported_arrays()
    with pytest.raises(ValueError, match="strip_training_state"):
        PSAClassifier(max_iter=1).fit(X, y).strip_training_state().rebuild_exported_arrays()


def test_sbm_rank_for_is_the_rank_a_fit_uses():
    assert SBMLogisticRegression(rank=None).rank_for(10_000, 5) is None
    assert SBMLogisticRegression(rank=3).rank_for(10, 1) == 3
    auto = SBMLogisticRegression()
    small, large = auto.rank_for(20, 3), auto.rank_for(100_000, 10)
    assert small is None and isinstance(large, int) and large >= 1
    rng = np.random.RandomState(0)
    X = rng.randn(150, 20)
    y = rng.randint(3, size=150)
    assert auto.fit(X, y).rank_ == small
    assert SBMLogisticRegression(rank=3, max_iter=1).fit(X, y).rank_ == 3
