"""The package's layout rules, read from its source files.

- no function or method over ``MAX_FUNCTION_LINES`` lines, Python (``ast``)
  or Cython (``def`` / ``cdef`` / ``cpdef`` in ``_core``, by indentation);
- no Python file over ``MAX_PYTHON_CODE_LINES`` lines of code (docstrings,
  comments and blank lines not counted);
- no ``_core`` source file over ``MAX_CORE_FILE_LINES`` lines;
- ``cli/``, ``crfsuite/`` and ``dask/`` do not import ``_core``: they go
  through the estimators and the package's Python modules;
- ``cli/`` calls no private method of another object (an estimator's
  ``obj._name(...)``): only its own (``self`` / ``cls`` / ``super()``) and
  module functions.

Each checker is also run on a small synthetic source, so that a test that
passes on the package is known to fail on a violation.
"""
import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "sklearn_secondorder"
PACKAGE = PACKAGE_DIR.name
CORE_DIR = PACKAGE_DIR / "_core"

MAX_FUNCTION_LINES = 100
MAX_PYTHON_CODE_LINES = 500
MAX_CORE_FILE_LINES = 900

#: The packages that must not import ``_core``.
NO_CORE_IMPORTS = ("cli", "crfsuite", "dask")

#: ``_core``'s hand-written sources (not the C that Cython generates).
CORE_SOURCE_SUFFIXES = (".pyx", ".pxd", ".pxi", ".py", ".h")

#: namedtuple's documented methods, public despite their underscore.
PUBLIC_UNDERSCORE_METHODS = frozenset({"_replace", "_asdict", "_make"})


def _python_files(directory=PACKAGE_DIR):
    return sorted(directory.rglob("*.py"))


def _rel(path):
    return path.relative_to(PACKAGE_DIR.parent).as_posix()


def _module_name(path):
    """``sklearn_secondorder/cli/_train.py`` -> ``sklearn_secondorder.cli._train``
    (a package's ``__init__.py`` keeps its ``.__init__``: relative imports in it
    count from the package)."""
    return ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)


# ---- Python: function length, lines of code ----------------------------------------

def long_python_functions(source, limit=MAX_FUNCTION_LINES):
    """``[(name, first_line, n_lines)]`` of the functions and methods of
    ``source`` longer than ``limit`` lines, from the ``def`` line to the last
    line of the body (decorators aside; a nested function counts in its own
    right and within its enclosing one)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n_lines = node.end_lineno - node.lineno + 1
            if n_lines > limit:
                out.append((node.name, node.lineno, n_lines))
    return out


def _docstring_lines(tree):
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def python_code_lines(source):
    """The number of lines of ``source`` that hold code: a line counts when a
    token other than a comment starts on it or spans it (a multi-line string
    counts all its lines), except the module's, classes' and functions'
    docstrings. Blank and comment-only lines do not count."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - _docstring_lines(ast.parse(source)))


# ---- Cython: function length -------------------------------------------------------

_CY_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async\s+)?(?:def|cdef|cpdef)\b(?P<rest>.*)$")
#: ``cdef`` statements that are no function: types, declarations, blocks.
_CY_NOT_FUNCTION = re.compile(
    r"^\s*(?:public\s+|readonly\s+|packed\s+)*"
    r"(?:class|struct|union|enum|cppclass|extern|fused|ctypedef)\b")
_TRIPLE = re.compile(r'"""|\'\'\'')


def _strip_comment(line):
    # (a '#' inside a string is rare in a def header: good enough for a header)
    return line.split("#", 1)[0].rstrip()


def _indent(line):
    return len(line) - len(line.lstrip(" \t"))


def cython_functions(source):
    """``[(name, first_line, n_lines)]`` of the ``def`` / ``cdef`` /
    ``cpdef`` functions of a Cython source that have a body.

    A header is a ``def``, ``cdef`` or ``cpdef`` line (not ``cdef class``,
    ``struct``, ``extern`` ... nor a variable declaration) that, once its
    parentheses close, ends with ``:``; a declaration without a body (a
    ``.pxd``'s prototype) has no ``:``. The body is every line after the
    header indented deeper than the ``def`` line, blank and comment lines
    and the inside of triple-quoted strings whatever their indentation; the
    function's lines run from the header to the last line of its body.
    """
    lines = source.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = _CY_DEF.match(line)
        if m is None or _CY_NOT_FUNCTION.match(m.group("rest")):
            continue
        # the header: until the parentheses balance
        header, j = _strip_comment(line), i
        while header.count("(") > header.count(")") and j + 1 < len(lines):
            j += 1
            header += " " + _strip_comment(lines[j]).strip()
        if "(" not in header or not header.endswith(":"):
            continue                    # a declaration or a variable
        name = re.match(r"([\w\s\*\[\],.]*?)(\w+)\s*\(", m.group("rest").strip())
        name = name.group(2) if name else "?"
        indent = _indent(line)
        last, in_string = j, False
        for k in range(j + 1, len(lines)):
            text = lines[k]
            if in_string:
                last = k
            elif text.strip() and not text.lstrip().startswith("#"):
                if _indent(text) <= indent:
                    break
                last = k
            if len(_TRIPLE.findall(text)) % 2 == 1:
                in_string = not in_string
        out.append((name, i + 1, last - i + 1))
    return out


def long_cython_functions(source, limit=MAX_FUNCTION_LINES):
    return [f for f in cython_functions(source) if f[2] > limit]


# ---- imports of _core --------------------------------------------------------------

def _resolve(module, level, current):
    """The absolute module of ``from <level dots><module> import ...`` in the
    module ``current`` (``_module_name``'s form)."""
    if level == 0:
        return module or ""
    base = current.split(".")[:-level]
    return ".".join(base + ([module] if module else []))


def core_imports(source, module_name, core=f"{PACKAGE}._core"):
    """``[(line, imported module)]`` of the imports of ``core`` (or of a
    module in it) in ``source``, the text of the module ``module_name``
    (absolute or relative, ``import``, ``from ... import`` and ``from
    <package> import _core``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, module_name)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name == core or name.startswith(core + "."):
                out.append((node.lineno, name))
                break
    return out


# ---- private calls -----------------------------------------------------------------

def _module_names(tree, module_name, is_module):
    """The names that ``tree`` binds to modules: ``import a.b`` (``a``),
    ``import a.b as c`` (``c``), and ``from p import m`` where ``p.m`` is a
    module (``is_module``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, module_name)
            for a in node.names:
                if is_module(f"{base}.{a.name}"):
                    names.add(a.asname or a.name)
    return names


def _is_package_module(name):
    """Whether ``name`` is a module or package of this source tree."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return False
    path = PACKAGE_DIR.parent.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_calls(source, module_name="module", is_module=_is_package_module):
    """``[(line, call)]`` of the calls ``obj._name(...)`` in ``source`` where
    ``_name`` is private (one leading underscore, not a dunder, not one of
    namedtuple's ``PUBLIC_UNDERSCORE_METHODS``) and ``obj`` is none of:
    ``self``, ``cls``, ``super()``, a name bound to a module by an import.
    Anything else (``est._fit(...)``, ``self.model._state(...)``,
    ``get()._x(...)``) is another object's private method."""
    tree = ast.parse(source)
    modules = _module_names(tree, module_name, is_module)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, obj = node.func.attr, node.func.value
        if (not attr.startswith("_") or attr.startswith("__")
                or attr in PUBLIC_UNDERSCORE_METHODS):
            continue
        if isinstance(obj, ast.Name) and (obj.id in ("self", "cls") or obj.id in modules):
            continue
        if (isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name)
                and obj.func.id == "super"):
            continue
        out.append((node.lineno, ast.unparse(node.func)))
    return out


# ---- the checkers on synthetic sources ---------------------------------------------

def _function_source(n_body_lines, name="f"):
    body = "".join(f"    x{i} = {i}\n" for i in range(n_body_lines))
    return f"def {name}():\n{body}"


def test_python_function_length_checker():
    assert long_python_functions(_function_source(MAX_FUNCTION_LINES - 1)) == []
    src = "class A:\n" + "".join("    " + ln + "\n"
                                 for ln in _function_source(MAX_FUNCTION_LINES).splitlines())
    assert long_python_functions(src) == [("f", 2, MAX_FUNCTION_LINES + 1)]


def test_python_code_line_counter():
    src = '''"""Module
docstring."""
import os  # a comment

# a comment line


class A:
    """Class docstring."""

    def f(self):
        """Function
        docstring."""
        s = """a string
        that is code"""
        return s
'''
    # import, class, def, the two lines of the string, return
    assert python_code_lines(src) == 6


def test_cython_scanner():
    src = '''cdef extern from "x.h":
    double sqrt(double x) nogil

cdef struct Pair:
    double a

cdef class Box:
    cdef double v

    def __init__(self, double v):
        self.v = v

    cpdef double twice(self):
        return 2 * self.v

cdef inline double add(double a,
                       double b) noexcept nogil:
    # a comment
    cdef double s = a + b
    """a string
that starts at column 0"""

    return s

cdef double declared(double x) noexcept nogil
cdef double y = sqrt(2.0)

def top():
    pass
'''
    assert cython_functions(src) == [("__init__", 10, 2), ("twice", 13, 2),
                                     ("add", 16, 8), ("top", 28, 2)]
    long = "cdef int g(int a) nogil:\n" + "".join(f"    a += {i}\n"
                                                 for i in range(MAX_FUNCTION_LINES))
    assert long_cython_functions(long) == [("g", 1, MAX_FUNCTION_LINES + 1)]
    assert long_cython_functions(long, limit=MAX_FUNCTION_LINES + 1) == []


def test_core_import_checker():
    mod = f"{PACKAGE}.cli._x"
    assert core_imports("import numpy\nfrom .. import metrics\nfrom ._y import z\n",
                        mod) == []
    assert core_imports("from .._core._dataset import RowDataset\n", mod) == [
        (1, f"{PACKAGE}._core._dataset")]
    assert core_imports("from .. import _core\n", mod) == [(1, f"{PACKAGE}._core")]
    assert core_imports(f"import {PACKAGE}._core._losses as L\n", mod) == [
        (1, f"{PACKAGE}._core._losses")]
    assert core_imports(f"def f():\n    from {PACKAGE}._core import x\n", mod) == [
        (2, f"{PACKAGE}._core")]
    # in a package's __init__, one dot is the package itself
    assert core_imports("from ._core import x\n", f"{PACKAGE}.__init__") == [
        (1, f"{PACKAGE}._core")]
    assert core_imports("from ._core import x\n", f"{PACKAGE}.cli.__init__") == []


def test_private_call_checker():
    def is_module(name):
        return name in {f"{PACKAGE}.cli._stream", "pkg.mod"}
    src = '''import numpy as np
from . import _stream
from pkg import mod, func


class C(Base):
    def f(self, est):
        self._ok()
        super()._ok()
        np._ok()
        _stream._ok()
        mod._ok()
        row._replace(a=1)
        est.__len__()
        est.public()
        est._fit(1)
        self.model._state()
        func._bad()
        make()._bad()

    @classmethod
    def g(cls):
        cls._ok()
'''
    assert private_calls(src, f"{PACKAGE}.cli._x", is_module) == [
        (16, "est._fit"), (17, "self.model._state"), (18, "func._bad"), (19, "make()._bad")]


# ---- the package ---------------------------------------------------------------------

def test_scanners_see_the_package():
    """The tests below read the files they should: guards against an empty glob."""
    assert len(_python_files()) > 50
    assert len(list(CORE_DIR.glob("*.pyx"))) > 10
    assert sum(len(cython_functions(p.read_text(encoding="utf-8")))
               for p in CORE_DIR.glob("*.pyx")) > 100
    assert _is_package_module(f"{PACKAGE}.cli._stream")
    assert _is_package_module(f"{PACKAGE}.cli")
    assert not _is_package_module(f"{PACKAGE}.cli.nothing")


def test_no_long_python_function():
    long = [f"{_rel(p)}:{line} {name} ({n} lines)" for p in _python_files()
            for name, line, n in long_python_functions(p.read_text(encoding="utf-8"))]
    assert long == []


def test_no_long_python_file():
    long = {_rel(p): n for p in _python_files()
            if (n := python_code_lines(p.read_text(encoding="utf-8"))) > MAX_PYTHON_CODE_LINES}
    assert long == {}


def test_no_long_cython_function():
    long = [f"{_rel(p)}:{line} {name} ({n} lines)"
            for p in sorted(CORE_DIR.glob("*.pyx")) + sorted(CORE_DIR.glob("*.pxd"))
            + sorted(CORE_DIR.glob("*.pxi"))
            for name, line, n in long_cython_functions(p.read_text(encoding="utf-8"))]
    assert long == []


def test_no_long_core_file():
    long = {_rel(p): n for p in sorted(CORE_DIR.iterdir())
            if p.suffix in CORE_SOURCE_SUFFIXES
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_CORE_FILE_LINES}
    assert long == {}


@pytest.mark.parametrize("sub", NO_CORE_IMPORTS)
def test_no_core_import(sub):
    files = _python_files(PACKAGE_DIR / sub)
    assert files
    found = [f"{_rel(p)}:{line} {name}" for p in files
             for line, name in core_imports(p.read_text(encoding="utf-8"), _module_name(p))]
    assert found == []


def test_cli_calls_no_private_method():
    files = _python_files(PACKAGE_DIR / "cli")
    assert files
    found = [f"{_rel(p)}:{line} {call}" for p in files
             for line, call in private_calls(p.read_text(encoding="utf-8"), _module_name(p))]
    assert found == []
