"""Build the Cython extensions of sklearn_secondorder.

Every ``sklearn_secondorder/_core/*.pyx`` becomes one extension module, found
by a glob: a new module needs no change here. Global directives follow
scikit-learn's: no bounds checks or wrap-around, C division. Set
``SKSO_DEBUG_CYTHON=1`` to turn bounds checking on for a debug test run,
``SKSO_ONLY=name1,name2`` to build only some modules while developing, and
``SKSO_SHARED_UTILITY=0`` to give every module its own copy of Cython's
utility code (should a Cython version fail on the shared module).

Three things keep ``pip install`` short:

- Cython and the C compiler run on every core (``SKSO_BUILD_JOBS=N`` sets
  the number of jobs).
- Cython's shared utility module (Cython >= 3.1, as scikit-learn's
  ``_cyutility``): the memoryview support code is compiled once, into
  ``_core/_cyutility``, instead of into every module (about half of the
  compiler's time).
- A built module is kept in ``build/skso-cache/`` under a hash of its inputs
  (its ``.pyx``, every ``.pxd`` and ``.h`` of the core, the versions of
  Python, Cython, NumPy and SciPy, the directives and compiler flags). A
  later build from the same checkout (the README's other command, an
  editable install, the documentation's) copies it instead of running Cython
  and the compiler again; only a changed module is built again.
  ``build_ext --force`` rebuilds everything; ``rm -rf build`` empties the cache.
"""
import glob
import hashlib
import os
import shutil
import sys
import sysconfig
from importlib.metadata import version

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("SKSO_DEBUG_CYTHON", "0") == "1"
ONLY = [s for s in os.environ.get("SKSO_ONLY", "").split(",") if s]
JOBS = int(os.environ.get("SKSO_BUILD_JOBS", "0")) or os.cpu_count() or 1
FORCE = "--force" in sys.argv or "-f" in sys.argv
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
# The lazy PSA core's event walk (_lazy_steps.pxd: walk, apply_event, decay,
# idle_windows) is inline code that GCC leaves out of line at its default
# limits, passing each block's fields through memory; inlined into the
# passes, a binary PSA pass is about 17% faster (same-run A/B). GCC only:
# other compilers have no such parameters.
LAZY_CORE_MODULES = ("_psa_fast", "_crf_psa")
GCC_INLINE_ARGS = ["--param=max-inline-insns-single=2000", "--param=max-inline-insns-auto=500",
                   "--param=large-function-growth=2000", "--param=inline-unit-growth=500"]


def _common_inputs():
    """What every module depends on besides its own ``.pyx``."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(CORE, "*.pxd")) +
                       glob.glob(os.path.join(CORE, "*.h"))):
        with open(path, "rb") as f:
            digest.update(path.encode() + f.read())
    digest.update(repr((
        sys.version, sysconfig.get_config_var("EXT_SUFFIX"), version("Cython"),
        np.__version__, version("scipy"), sorted(directives.items()), DEFINE_MACROS,
        COMPILE_ARGS, GCC_INLINE_ARGS, os.environ.get("CC", ""), os.environ.get("CFLAGS", ""),
        SHARED_UTILITY,
    )).encode())
    return digest.digest()


COMMON = _common_inputs()


def cached_path(name, pyx=None):
    """Where the module built from these inputs is kept (it may not exist yet)."""
    digest = hashlib.sha256(COMMON)
    if pyx is not None:
        with open(pyx, "rb") as f:
            digest.update(f.read())
    return os.path.join(CACHE, f"{name}-{digest.hexdigest()[:20]}.so")


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


def _is_gcc(compiler):
    """Whether a distutils compiler is GCC (not clang under the name cc)."""
    import subprocess
    cmd = getattr(compiler, "compiler_so", None)
    if not cmd:
        return False
    try:
        out = subprocess.run([cmd[0], "--version"], capture_output=True, text=True,
                             check=False).stdout
    except OSError:
        return False
    return "Free Software Foundation" in out and "clang" not in out.lower()


class CachedParallelBuildExt(build_ext):
    """``build_ext`` on every core, copying the modules found in the cache."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS
        # the longest compilations first, so that no core waits for one
        # large module at the end
        self.extensions.sort(key=lambda ext: -sum(
            os.path.getsize(s) for s in ext.sources if os.path.exists(s)))

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        if os.path.exists(ext.cached) and not self.force:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(ext.cached, target)
            print(f"{ext.name}: unchanged, copied from {ext.cached}")
            return
        if ext.name.rsplit(".", 1)[-1] in LAZY_CORE_MODULES and _is_gcc(self.compiler):
            ext.extra_compile_args = ext.extra_compile_args + GCC_INLINE_ARGS
        super().build_extension(ext)
        os.makedirs(CACHE, exist_ok=True)
        shutil.copyfile(target, ext.cached + ".tmp")
        os.replace(ext.cached + ".tmp", ext.cached)  # atomic: no half file if interrupted


def core_extensions():
    """One extension per ``_core/*.pyx`` plus the shared utility module,
    Cython run on those not in the cache."""
    extensions = []
    for pyx in sorted(glob.glob(os.path.join(CORE, "*.pyx"))):
        name = os.path.splitext(os.path.basename(pyx))[0]
        if not ONLY or name in ONLY:
            ext = Extension(f"sklearn_secondorder._core.{name}", [pyx],
                            include_dirs=[np.get_include()], define_macros=DEFINE_MACROS,
                            extra_compile_args=COMPILE_ARGS)
            ext.cached = cached_path(ext.name, pyx)
            extensions.append(ext)
    if SHARED_UTILITY:
        shared = Extension(SHARED, [], extra_compile_args=COMPILE_ARGS)
        shared.cached = cached_path(SHARED)
        extensions.append(shared)

    todo = [ext for ext in extensions if FORCE or not os.path.exists(ext.cached)]
    done = [ext for ext in extensions if ext not in todo]
    for ext in done:                  # (copied by build_ext: no Cython, no compiler)
        ext.sources = [os.path.splitext(ext.sources[0])[0] + ".c"] if ext.sources else []
    if not todo:
        return done
    # (force: a C file left by a build with other directives or without the
    # shared module would otherwise be taken as up to date by its timestamp)
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
    cached = {ext.name: ext.cached for ext in todo}
    for module in built:
        module.cached = cached[module.name]
    return done + built


setup(ext_modules=core_extensions(), cmdclass={"build_ext": CachedParallelBuildExt})
