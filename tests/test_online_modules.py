"""The online taggers' modules: written-out docstrings, exports, old pickles.

The three estimators left ``sequence/_online.py`` (now their shared base) for
modules of their own; pickles and ``skso`` model files written before name
them at ``sklearn_secondorder.sequence._online`` and must still load.
"""
import ast
import pickle
from pathlib import Path

import pytest
from numpy.testing import assert_array_equal

import sklearn_secondorder
import sklearn_secondorder.sequence
from sklearn_secondorder import (
    AROWSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
)

TAGGERS = [AveragedPerceptronSequenceTagger, PassiveAggressiveSequenceTagger,
           AROWSequenceTagger]
X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}]]
y = [["DET", "N"], ["DET", "N"], ["DET", "N"]]


def test_no_templated_docstrings():
    """Project rule: every ``__doc__`` is written out, never assigned or formatted."""
    root = Path(sklearn_secondorder.__file__).parent
    assigned = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                       else [])
            for t in targets:
                name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
                if name == "__doc__":
                    assigned.append(f"{path.relative_to(root)}:{node.lineno}")
    assert assigned == []


@pytest.mark.parametrize("cls", TAGGERS)
def test_exports_and_docstring(cls):
    assert getattr(sklearn_secondorder, cls.__name__) is cls
    assert getattr(sklearn_secondorder.sequence, cls.__name__) is cls
    assert cls.__name__ in sklearn_secondorder.sequence.__all__
    doc = cls.__doc__
    assert "{" + "attributes}" not in doc and "{" + "loss}" not in doc and "{{" not in doc
    for section in ("Parameters", "Attributes", "See Also", "References", "Examples"):
        assert f"\n    {section}\n    {'-' * len(section)}\n" in doc


@pytest.mark.parametrize("cls", TAGGERS)
def test_pickle_naming_the_old_module_loads(cls):
    tagger = cls(max_iter=3, random_state=0).fit(X, y)
    data = pickle.dumps(tagger, protocol=0)        # text protocol: module names in clear
    new = f"{cls.__module__}\n".encode()
    assert cls.__module__ != "sklearn_secondorder.sequence._online" and new in data
    old = data.replace(new, b"sklearn_secondorder.sequence._online\n")
    loaded = pickle.loads(old)
    assert type(loaded) is cls
    assert_array_equal(loaded.coef_, tagger.coef_)
    assert loaded.predict(X) == tagger.predict(X)


def test_the_old_module_names_nothing_else():
    from sklearn_secondorder.sequence import _online
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchTagger'"):
        _online.NoSuchTagger  # noqa: B018
