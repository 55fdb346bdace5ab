"""Build the Cython extensions of sklearn_secondorder.

Every ``sklearn_secondorder/_core/*.pyx`` becomes one extension module. Global
directives follow scikit-learn's: no bounds checks or wrap-around, C division.
Set ``SKSO_DEBUG_CYTHON=1`` to turn bounds checking on for a debug test run,
and ``SKSO_ONLY=name1,name2`` to build only some modules while developing.
"""
import glob
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("SKSO_DEBUG_CYTHON", "0") == "1"
ONLY = [s for s in os.environ.get("SKSO_ONLY", "").split(",") if s]

directives = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": DEBUG,
    "nonecheck": False,
}

extensions = []
for path in sorted(glob.glob(os.path.join("sklearn_secondorder", "_core", "*.pyx"))):
    name = os.path.splitext(os.path.basename(path))[0]
    if ONLY and name not in ONLY:
        continue
    extensions.append(
        Extension(
            f"sklearn_secondorder._core.{name}",
            [path],
            include_dirs=[np.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            # -ffp-contract=off: no fused multiply-add, so the scalar loops and
            # every target clone of the vector loops round alike;
            # -fno-trapping-math: floating-point operations raise no trap the
            # code relies on (values unchanged), which lets GCC turn the
            # selects of the L1 row loop (_block_ops.h) into
            # blends and vectorise them for AVX2, not only AVX-512 (masks)
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-trapping-math"],
        )
    )

setup(ext_modules=cythonize(extensions, compiler_directives=directives))
