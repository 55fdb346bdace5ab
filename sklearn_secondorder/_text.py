"""The compiled text readers and feature hashing, for the layers above the core.

The command line (``cli/``) reads svmlight and Vowpal Wabbit files and hashes
string features through these names, so that it imports no ``_core`` module
(each layer behind its door, as ``sequence/_inference.py`` is for the CRF
inference). The readers release the GIL; their contracts are documented in
``_core/_text_readers.pyx`` and ``_core/_hashing.pyx``.
"""
from ._core._hashing import hash_strings
from ._core._text_readers import (
    count_newlines,
    newline_positions,
    parse_svmlight,
    parse_vw,
    scan_svmlight,
    scan_vw,
)

__all__ = ["count_newlines", "hash_strings", "newline_positions", "parse_svmlight",
           "parse_vw", "scan_svmlight", "scan_vw"]
