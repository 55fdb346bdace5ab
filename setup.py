"""Build the Cython extensions of sklearn_secondorder.

Every ``sklearn_secondorder/_core/*.pyx`` becomes one extension module, found
by a glob: a new module needs no change here. Global directives follow
scikit-learn's: no bounds checks or wrap-around, C division. Set
``SKSO_DEBUG_CYTHON=1`` to turn bounds checking on for a debug test run,
``SKSO_ONLY=name1,name2`` to build only some modules while developing, and
``SKSO_SHARED_UTILITY=0`` to give every module its own copy of Cython's
utility code (should a Cython version fail on the shared module).

What keeps ``pip install`` short:

- No debug information (``-g0``): Python's own flags (sysconfig's
  ``CFLAGS``) carry ``-g``, and GCC's variable tracking through the inlined
  kernels was a large part of the compiler's time, for not one instruction
  more or less (every module's ``.text`` is the same byte for byte).
  scikit-learn's and NumPy's release builds (meson-python's default
  ``buildtype=release``) carry none either. ``CFLAGS=-g`` (or
  ``SKSO_DEBUG_CYTHON=1``) keeps it, for a debugger.
- Cython and the C compiler run on every core (``SKSO_BUILD_JOBS=N`` sets
  the number of jobs), the largest modules first.
- Cython's shared utility module (Cython >= 3.1, as scikit-learn's
  ``_cyutility``): the memoryview support code is compiled once, into
  ``_core/_cyutility``, instead of into every module.
- A built module is kept in ``build/skso-cache/`` under a hash of what
  makes it: its own ``.pyx``, the ``.pxd`` files it cimports and the ``.h``
  files they (and those headers) include, the compiler's identity (its
  ``--version`` output) and its whole command line with the module's flags
  (``-g0`` included), the directives and the versions of Python, Cython
  and NumPy. A later build
  from the same checkout (the README's other command, an editable install,
  the documentation's) copies it instead of running Cython and the compiler
  again; only a module whose inputs changed is built again, and another
  compiler or other ``CFLAGS`` build everything again. ``build_ext
  --force`` rebuilds everything; ``rm -rf build`` empties the cache.
- Cython runs in ``build_ext`` itself, and NumPy and Cython are imported
  there, not when this file is imported: pip's other build hooks
  (requirements, metadata) run this file without them, and a ``pip
  install`` runs Cython once per module.

Every module gets the same flags: ``-O2`` for the modules outside the hot
loops (readers, hashing, datasets, Cython's utility module) saved nothing
measurable; what ``-O3`` costs the compiler is in the hot kernels, which
keep it.

Why this cache and not a standard tool: a fresh build would not be faster
with meson-python (scikit-learn's build): the compiler's time is the same C
with the same release flags, and ninja's parallelism on the cores is what
``build_ext`` has; meson and ninja would be two more build requirements,
its editable installs rebuild on import and need the build requirements
installed without isolation (``--no-build-isolation``), which changes the
commands the README gives. Cython's own cache (``cythonize(cache=True)``)
keeps only the generated C, and the compiler is most of the time. ccache
keeps the objects but is a program to install (nothing pip can require of
every user) and Cython still runs before it; a user who has it can still
use it (``CC="ccache gcc" pip install .``: ``CC`` is in the key above). The
hash above is the part of those that this build needs: whole modules,
keyed on their own inputs.
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("SKSO_DEBUG_CYTHON", "0") == "1"
ONLY = [s for s in os.environ.get("SKSO_ONLY", "").split(",") if s]
JOBS = int(os.environ.get("SKSO_BUILD_JOBS", "0")) or os.cpu_count() or 1
CORE = os.path.join("sklearn_secondorder", "_core")
CACHE = os.path.join("build", "skso-cache")
SHARED = "sklearn_secondorder._core._cyutility"
SHARED_UTILITY = os.environ.get("SKSO_SHARED_UTILITY", "1") != "0"

directives = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": DEBUG,
    "nonecheck": False,
}
DEFINE_MACROS = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
# -ffp-contract=off: no fused multiply-add, so the scalar loops and every
# target clone of the vector loops round alike; -fno-trapping-math:
# floating-point operations raise no trap the code relies on (values
# unchanged), which lets GCC turn the selects of the L1 row loop
# (_block_ops.h) into blends and vectorise them for AVX2, not only AVX-512
# (masks)
COMPILE_ARGS = ["-O3", "-ffp-contract=off", "-fno-trapping-math"]
# -g0: no debug information, unless asked for (see the module docstring)
if not DEBUG and not re.search(r"(^|\s)-g(?!0)", os.environ.get("CFLAGS", "")):
    COMPILE_ARGS.append("-g0")
# (The lazy core's event walk is inlined into the passes by name, by
# _lazy_inline.h: no module gets flags of its own.)


def _local_includes(path):
    """The project files that a ``.pyx``/``.pxd`` (``cdef extern from "x.h"``)
    or a header (``#include "x.h"``) names, found beside it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = re.findall(r'^\s*cdef\s+extern\s+from\s+"([^"*]+)"', text, re.M)
    names += re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)
    found = (os.path.join(os.path.dirname(path), n) for n in names)
    return [p for p in found if os.path.exists(p)]


def module_inputs(pyx, tree):
    """The project files a module is built from: its ``.pyx``, the ``.pxd``
    files it cimports (Cython's own dependency tree, transitively) and the
    headers that those and the headers themselves include."""
    todo = [os.path.normpath(p) for p in tree.all_dependencies(pyx)
            if os.path.abspath(p).startswith(os.path.abspath(CORE))]
    seen = set(todo)
    while todo:
        for dep in _local_includes(todo.pop()):
            dep = os.path.normpath(dep)
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return sorted(seen)


def compiler_identity(compiler):
    """The compiler's kind, its whole command line (the flags of Python's
    build and of ``CFLAGS``/``CC``) and its ``--version`` output (empty for
    a compiler that has no such option); behind a compiler cache
    (``CC="ccache gcc"``), the compiler's as well as the cache's."""
    cmd = list(getattr(compiler, "compiler_so", None) or [])
    programs = cmd[:1]
    if cmd and os.path.basename(cmd[0]) in ("ccache", "sccache") and len(cmd) > 1:
        programs.append(cmd[1])
    version_text = ""
    for program in programs:
        try:
            version_text += subprocess.run([program, "--version"], capture_output=True,
                                           text=True, check=False).stdout
        except OSError:
            pass
    return repr((type(compiler).__name__, cmd, version_text))


def cache_key(ext, files, compiler_id):
    """The hash under which module ``ext`` built from ``files`` is cached."""
    digest = hashlib.sha256(repr((
        ext.name, sys.version, sysconfig.get_config_var("EXT_SUFFIX"), version("Cython"),
        version("numpy"), sorted(directives.items()), ext.define_macros,
        ext.extra_compile_args, SHARED_UTILITY, compiler_id,
    )).encode())
    # (not the include directories: pip's isolated build puts NumPy's in a
    # new temporary directory each time; its version is above)
    for path in files:
        with open(path, "rb") as f:
            digest.update(path.encode() + b"\0" + f.read())
    return digest.hexdigest()[:20]


def lacks_buffer_structs(c_file):
    """Whether Cython left out the buffer type structs that its shared utility module needs.

    Cython 3.3 generates, for a module that casts pointers to arrays
    (``<double[:n]>p``) but declares no typed memoryview, the shared
    memoryview declarations without the ``__Pyx_TypeInfo`` struct they use:
    the C file does not compile. Such a module keeps its own copy of the
    utility code instead.
    """
    with open(c_file) as f:
        text = f.read()
    return "__Pyx_TypeInfo" in text and "} __Pyx_TypeInfo;" not in text


class CachedParallelBuildExt(build_ext):
    """``build_ext`` on every core: Cython on the modules not in the cache,
    then the compiler, or a copy from the cache."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS
        # the longest compilations first, so that no core waits for one
        # large module at the end
        self.extensions.sort(key=lambda ext: -sum(
            os.path.getsize(s) for s in ext.sources if os.path.exists(s)))

    def build_extensions(self):
        # (here, not in finalize_options: the compiler is known; NumPy and
        # Cython are imported only here, not by pip's other build hooks)
        import numpy as np

        for ext in self.extensions:
            if ext.name != SHARED:
                ext.include_dirs.append(np.get_include())
        self.extensions = self.cythonize(self.extensions)
        super().build_extensions()

    def cythonize(self, extensions):
        """Key each module on its inputs and run Cython on those not in the
        cache (all with ``--force``); the others keep their ``.c`` name,
        never compiled (``build_extension`` copies them)."""
        from Cython.Build import cythonize
        from Cython.Build.Dependencies import create_dependency_tree

        compiler_id = compiler_identity(self.compiler)
        tree = create_dependency_tree()
        pyx_files = [pyx for ext in extensions for pyx in ext.sources]
        for ext in extensions:
            files = module_inputs(ext.sources[0], tree) if ext.sources else pyx_files
            ext.cached = os.path.join(
                CACHE, f"{ext.name}-{cache_key(ext, files, compiler_id)}.so")
        todo = [ext for ext in extensions if self.force or not os.path.exists(ext.cached)]
        done = [ext for ext in extensions if ext not in todo]
        for ext in done:
            ext.sources = [os.path.splitext(s)[0] + ".c" for s in ext.sources]
        if not todo:
            return done
        # (force: a C file left by a build with other directives or without
        # the shared module would otherwise be taken as up to date by its
        # timestamp)
        options = dict(compiler_directives=directives, nthreads=JOBS, force=True)
        if not SHARED_UTILITY:
            built = cythonize(todo, **options)
        else:
            built = cythonize(todo, shared_utility_qualified_name=SHARED, **options)
            todo_by_name = {ext.name: ext for ext in todo}
            own = [todo_by_name[m.name] for m in built
                   if m.name != SHARED and lacks_buffer_structs(m.sources[0])]
            if own:
                redone = {m.name: m for m in cythonize(own, **options)}
                built = [redone.get(m.name, m) for m in built]
        # (the C sources onto setuptools' own Extension objects)
        sources = {m.name: m.sources for m in built}
        for ext in todo:
            ext.sources = sources[ext.name]
        return done + todo

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        if os.path.exists(ext.cached) and not self.force:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(ext.cached, target)
            print(f"{ext.name}: unchanged, copied from {ext.cached}")
            return
        super().build_extension(ext)
        os.makedirs(CACHE, exist_ok=True)
        shutil.copyfile(target, ext.cached + ".tmp")
        os.replace(ext.cached + ".tmp", ext.cached)  # atomic: no half file if interrupted


def core_extensions():
    """One extension per ``_core/*.pyx`` (Cython runs in ``build_ext``) plus
    the shared utility module."""
    extensions = []
    for pyx in sorted(glob.glob(os.path.join(CORE, "*.pyx"))):
        name = os.path.splitext(os.path.basename(pyx))[0]
        if not ONLY or name in ONLY:
            extensions.append(Extension(
                f"sklearn_secondorder._core.{name}", [pyx], include_dirs=[],
                define_macros=DEFINE_MACROS, extra_compile_args=COMPILE_ARGS))
    if SHARED_UTILITY:
        # (its key covers every .pyx: Cython writes into it what they use)
        extensions.append(Extension(SHARED, [], extra_compile_args=COMPILE_ARGS))
    return extensions


setup(ext_modules=core_extensions(), cmdclass={"build_ext": CachedParallelBuildExt})
