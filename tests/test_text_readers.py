"""Error messages of the compiled svmlight / VW readers, on the parse and the scan path.

``_core._text_readers`` reads each line twice: ``scan_*`` (labels, index
range) before training and ``parse_*`` (CSR rows) during it. Both must stop on
the same bad line with the same message; the texts here are the whole
messages (``tests/test_cli.py`` checks their prefixes through the command line).
"""
import re

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from sklearn_secondorder._core._text_readers import (
    newline_positions,
    parse_svmlight,
    parse_vw,
    scan_svmlight,
    scan_vw,
)

LABEL = "is not a number (multi-label files are not supported)"
INDEX = "is not a non-negative integer"


@pytest.mark.parametrize("text, message", [
    (b"1 1:1\nx 2:1\n", f"line 2: label 'x' {LABEL}"),
    (b"1 1:1\n1,2 2:1\n", f"line 2: label '1,2' {LABEL}"),
    (b"1 1:1\n\n1 2\n", "line 3: '2' is not 'index:value'"),
    (b"1 :1\n", "line 1: ':1' is not 'index:value'"),
    (b"1 1:1\n1 a:1\n", f"line 2: feature index 'a' {INDEX}"),
    (b"1 -3:1\n", f"line 1: feature index '-3' {INDEX}"),
    (b"1 1x:1\n", f"line 1: feature index '1x' {INDEX}"),
    # 14 digits pass 2**40 before the last one: the overflow check
    (b"1 12345678901234:1\n", f"line 1: feature index '12345678901234' {INDEX}"),
    (b"# c\n1 3:1 qid:2\n1 qid:2 7:1 2:1:1\n", "line 3: feature value '1:1' is not a number"),
])
def test_svmlight_errors_same_on_parse_and_scan(text, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_svmlight(text, False, 10, 1)
    if "feature value" in message:
        # the scan does not read values (the parse checks them)
        labels, lo, hi = scan_svmlight(text)
        assert labels.size == text.count(b"\n") - text.count(b"#")
    else:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            scan_svmlight(text)


def test_svmlight_first_line_offsets_the_line_numbers():
    text = b"1 1:1\n1 2\n"
    msg = re.escape("line 11: '2' is not 'index:value'")
    with pytest.raises(ValueError, match=msg):
        parse_svmlight(text, False, 10, 10)
    with pytest.raises(ValueError, match=msg):
        scan_svmlight(text, 10)


def test_svmlight_largest_index_below_the_overflow_check_is_read():
    big = (1 << 40) - 1
    text = f"1 qid:7 3:2 {big}:1.5\n-1 # comment\n".encode()
    labels, lo, hi = scan_svmlight(text)
    assert_array_equal(labels, [1, -1])
    assert (lo, hi) == (3, big)
    labels, indptr, indices, data = parse_svmlight(text, True, 10)
    assert_array_equal(indptr, [0, 1, 1])
    assert_array_equal(indices, [3])
    assert_array_equal(data, [2.0])


@pytest.mark.parametrize("text, message, scan_message", [
    (b"1 |a x\n1 a x\n", "line 2: no '|' (a VW line is '[label [weight]] |namespace "
     "features...')", "same"),
    (b"1 |a x\nfoo 1 |a x\n",
     "line 2: 'foo' is not a number (label or importance weight)", "same"),
    # the scan reads the label only; the importance weight is the parse's
    (b"1 w |a x\n", "line 1: 'w' is not a number (label or importance weight)", None),
    (b"1 |a x:y\n", "line 1: feature value 'y' is not a number", None),
    (b"1 |a x:\n", "line 1: feature value '' is not a number", None),
    (b"1 |a:s x\n", "line 1: namespace scale 's' is not a number", None),
])
def test_vw_errors_same_on_parse_and_scan(text, message, scan_message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_vw(text, 8)
    if scan_message is None:
        assert_array_equal(scan_vw(text), [1.0] * text.count(b"\n"))
    else:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            scan_vw(text)


def test_vw_scan_labels_match_the_parse():
    text = (b"1 2.5 'tag1|a:2 x y:3 |b z\n\n|c w\n-1 tag|c w\n"
            b"  'only_a_tag |c w\n0.5 3 |\n")
    labels, weights, *_ = parse_vw(text, 8)
    assert_array_equal(labels, [1, np.nan, -1, np.nan, 0.5])
    assert_array_equal(weights, [2.5, 1, 1, 1, 3])
    assert_array_equal(scan_vw(text), labels)


def _longest_stall(parse):
    """Run ``parse()`` on a thread; the longest this thread waited to run
    meanwhile, and the parse's own time. A parse that held the GIL would stall
    this thread for (about) its whole time."""
    import threading
    import time
    took = []

    def work():
        t = time.perf_counter()
        parse()
        took.append(time.perf_counter() - t)

    thread = threading.Thread(target=work)
    stamps = [time.perf_counter()]
    thread.start()
    while thread.is_alive():
        stamps.append(time.perf_counter())
    thread.join()
    return float(np.max(np.diff(stamps))), took[0]


@pytest.mark.parametrize("name", ["svmlight", "vw", "scan"])
def test_the_line_loops_release_the_gil(name):
    feats = " ".join(f"{j}:0.{j}" for j in range(1, 120))
    if name == "vw":
        buf = f"1 |ns {feats.replace(':', 'x:')}\n".encode() * 20_000
        parse = lambda: parse_vw(buf, 18)      # noqa: E731
    else:
        buf = f"-1 {feats}\n".encode() * 20_000
        parse = ((lambda: parse_svmlight(buf, False, 200)) if name == "svmlight"
                 else (lambda: scan_svmlight(buf)))
    stall, took = _longest_stall(parse)
    # (the arrays are made with the GIL, a small part of the time)
    assert stall < 0.5 * took, (stall, took)


@pytest.mark.parametrize("text", [b"", b"a", b"\n", b"a\nb", b"a\nb\n", b"\n\n\r\nx\n",
                                  bytes(range(256)) * 50])
def test_newline_positions_match_numpy(text):
    got = newline_positions(text)
    assert got.dtype == np.int64
    assert_array_equal(got, np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10))


def test_svmlight_scan_of_first_and_last_pair_is_the_scan_of_every_pair():
    # increasing indices (the format's order) with what a line's tail can
    # hold: qid, a comment, trailing blanks, '\r', one pair, no pair
    rng = np.random.default_rng(0)
    lines = []
    for i in range(400):
        idx = np.sort(rng.choice(10_000, size=rng.integers(0, 12), replace=False)) + 1
        pairs = " ".join(f"{j}:{rng.normal():.3g}" for j in idx)
        tail = ["", "  ", "\r", " # note 99999:1", "\t"][i % 5]
        qid = "qid:3 " if i % 7 == 0 else ""
        lines.append(f"{i % 3 - 1} {qid}{pairs}{tail}")
    lines.insert(5, "# a comment line")
    lines.insert(9, "")
    text = ("\n".join(lines) + "\n").encode()
    fast, every = scan_svmlight(text), scan_svmlight(text, 1, True)
    assert_array_equal(fast[0], every[0])
    assert fast[1:] == every[1:]
    assert scan_svmlight(b"1\n-1 # 5:1\n")[1:] == (-1, -1)
    # a line's tail that is not a plain pair is read pair by pair
    assert scan_svmlight(b"1 2:1 qid:9\n")[1:] == (2, 2)
    assert scan_svmlight(b"1 2:1 # 9:1\n")[1:] == (2, 2)
    with pytest.raises(ValueError, match=re.escape("line 1: 'x' is not 'index:value'")):
        scan_svmlight(b"1 2:1 7:1 x\n")


def test_svmlight_scan_reads_the_ends_of_a_line_and_the_strict_parse_the_middle():
    # an unordered line: its largest index sits between its first and last
    text = b"1 1:1 3:1\n-1 2:1 90:1 4:1\n"
    assert scan_svmlight(text)[1:] == (1, 4)
    assert scan_svmlight(text, 1, True)[1:] == (1, 90)
    labels, indptr, indices, data = parse_svmlight(text, False, 4)      # drops 90
    assert_array_equal(indices, [0, 2, 1, 3])
    message = ("line 2: feature index 90 is beyond the training's features (svmlight "
               "indices increase along a line, and the pre-scan reads each line's first "
               "and last; sort the line's pairs, or give --n-features)")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_svmlight(text, False, 4, 1, strict_range=True)
    # a bad pair between the ends is the parse's error, not the scan's
    bad = b"1 1:1 a:1 3:1\n"
    assert scan_svmlight(bad)[1:] == (1, 3)
    with pytest.raises(ValueError, match=f"line 1: feature index 'a' {INDEX}"):
        scan_svmlight(bad, 1, True)
    with pytest.raises(ValueError, match=f"line 1: feature index 'a' {INDEX}"):
        parse_svmlight(bad, False, 4, 1, strict_range=True)


def test_svmlight_integer_pairs_read_in_one_pass_match_load_svmlight_file(tmp_path):
    # integer values (the one-pass path) beside every other form of a pair:
    # signs, zeros, 15 and 16 digits, reals, tabs, several spaces, qid, a
    # comment, trailing blanks
    from sklearn.datasets import load_svmlight_file
    text = (b"1 1:1 3:-2 7:+5 9:0 12:-0 15:123456789012345 18:1234567890123456\n"
            b"-1 2:1.5 4:3\t6:2  8:-7 10:1e2 \n"
            b"1 qid:3 5:4 11:9 # 13:1\n"
            b"-1 1:00012 19:7\r\n")
    path = tmp_path / "f.svm"
    path.write_bytes(text)
    X_ref, y_ref = load_svmlight_file(str(path), n_features=20, zero_based=False)
    labels, indptr, indices, data = parse_svmlight(text, False, 20)
    got = sp.csr_matrix((data, indices, indptr), shape=(labels.size, 20))
    assert_array_equal(labels, y_ref)
    assert_array_equal(got.toarray(), X_ref.toarray())
    with pytest.raises(ValueError, match="line 1: feature index 0 in a one-based file"):
        parse_svmlight(b"1 0:5\n", False, 20)
