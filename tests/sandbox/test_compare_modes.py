"""The comparison modes (sandbox/runner/compare_modes.py): each mode's rules, re-derived from
its peer's source and cited here; the streaming matchers against the whole-output rule; `lines`
exactly as compare.stdout_matches; and agreement with verl's prime_code testing_util, run
unchanged from the installed package, on generated pairs (the other peers are not on PyPI:
bench/compare_agreement.py runs them beside ours, docs/JUDGING.md has the figures)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandbox.jobs import StdioTests
from sandbox.runner import compare_modes
from sandbox.runner.compare import stdout_matches
from sandbox.runner.compare_modes import MODES, judge, matcher

sys.path.insert(0, str(Path(__file__).parent))
from compare_pairs import pairs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI") == "true"


def test_the_table_names_each_peer_and_every_mode_the_contract_lists():
    for name in ["lines", "tokens", "codecontests", "sandboxfusion", "livecodebench", "apps", "taco", "prime_code",
                 *(f"testlib:{c}" for c in ["wcmp", "lcmp", "ncmp", "uncmp", "yesno", "rcmp4", "rcmp6", "rcmp9",
                                            "fcmp", "hcmp"])]:
        assert name in MODES, name
        assert MODES[name].peer and MODES[name].rule
    assert list(MODES)[0] == "lines" and StdioTests(cases=[{"stdout": "1"}]).compare == "lines"


def test_an_unknown_mode_is_refused_naming_the_field():
    with pytest.raises(ValidationError) as e:
        StdioTests.model_validate({"cases": [{"stdout": "1"}], "compare": "exact"})
    assert e.value.errors()[0]["loc"] == ("compare",) and "unknown comparison mode" in str(e.value)
    with pytest.raises(ValidationError) as e:
        StdioTests.model_validate({"cases": [{"stdout": "1", "compare": "testlib:nope"}]})
    assert e.value.errors()[0]["loc"] == ("cases", 0, "compare")


# (mode, output, expected, passes): each row's rule is the peer's, cited above its group
RULES = [
    # tokens (ours): whitespace tokens, line structure ignored; exact text without a tolerance
    ("tokens", "1\n2\n", "1 2", True), ("tokens", "1 2 3", "1 2", False), ("tokens", "1.0", "1", False),
    ("tokens", "", "", True), ("tokens", "\t\n", "", True), ("tokens", "A", "a", False),
    # codecontests: tester_sandboxer.cc SplitAndLowercase splits at " \n\t\r\v" and AsciiStrToLower's;
    # ValuesMatch: a token either side that SimpleAtoi/SimpleAtod cannot read compares as text;
    # else std::abs(ad - bd) < 1e-5 (strict; every int also reads as a double, so ints too)
    ("codecontests", "YES\r\n", "yes", True), ("codecontests", "1\n2", "1 2", True),
    ("codecontests", "0.333333", "0.3333333", True), ("codecontests", "1.00001", "1", False),
    ("codecontests", "1.000009", "1", True), ("codecontests", "100000000000000000001", "100000000000000000000", True),
    ("codecontests", "nan", "nan", True), ("codecontests", "nan 1", "nan 2", False), ("codecontests", "inf", "INF", True),
    ("codecontests", "inf 1", "infinity 1", False), ("codecontests", "+5", "5", True), ("codecontests", "-0", "0", True),
    ("codecontests", "1e", "1", False), ("codecontests", "0x10", "16", True), ("codecontests", "0x1p", "1", False), ("codecontests", "\f5", "5", True),
    ("codecontests", "É", "é", False), ("codecontests", "", "", True), ("codecontests", "1 2", "1", False),
    # sandboxfusion: sandbox/utils/testing.py check_stdio_test_case: strip(), split('\n'), lower(),
    # float_equal = abs(a - b) / max(abs(b), 1e-10) < 1e-5 (relative)
    ("sandboxfusion", "Yes\n\n", "YES", True), ("sandboxfusion", "1000001", "1000000", True),
    ("sandboxfusion", "1.00002", "1", False), ("sandboxfusion", "1 2", "1  2", False),
    ("sandboxfusion", "nan", "nan", True), ("sandboxfusion", "inf", "INF", True), ("sandboxfusion", "1e400", "inf", False),
    ("sandboxfusion", "1\r\n2", "1\n2", True), ("sandboxfusion", "1\n\n2", "1\n2", False),
    ("sandboxfusion", "0.0", "1e-11", False), ("sandboxfusion", "1_000", "1000", True),
    # livecodebench: testing_util.py get_stripped_lines and convert_line_to_decimals: equal lines,
    # else every token as Decimal equal (no tolerance; NaN never equals)
    ("livecodebench", "1.50 2\n", "1.5 2.0", True), ("livecodebench", "1.000001", "1", False),
    ("livecodebench", "Yes", "YES", False), ("livecodebench", "NaN", "NaN", True), ("livecodebench", "NaN 1", "NaN 1.0", False),
    ("livecodebench", "-0", "0", True), ("livecodebench", "1e3", "1000", True), ("livecodebench", " a \n b ", "a\nb", True),
    ("livecodebench", "a\n\nb", "a\nb", False),
    # apps: eval/testing_util.py run_test's cascade, ending in sets of tokens per line and round(float, 3)
    ("apps", "2 1\n", "1 2", True), ("apps", "b\na\n", "a\nb", True), ("apps", "1.0004", "1.0001", True),
    ("apps", "1.0000100001", "1", True), ("apps", "1 1 2", "2 1", True), ("apps", "1 3", "1 2", False),
    # prime_code: verl's copy drops the set steps and skips allclose where every line is str.isdigit()
    ("prime_code", "2 1\n", "1 2", False), ("prime_code", "1.000000001", "1", True),
    ("prime_code", "100000000000000000001", "100000000000000000000", False), ("prime_code", " x \n", "x", True),
    ("prime_code", "-1.0000000001", "-1", True),
    # taco: metrics/testing_util.py compare_std_results on subprocess's text-mode stdout (a str, not lines):
    # float() over its characters, then the set of all its tokens against the expected lines' token sets
    ("taco", "b a\n", "a\nb", True), ("taco", "ab", "a\nb", False), ("taco", "12\r\n", "12", True),
    ("taco", "1.5", "1.50001", False), ("taco", "5", "5.000001", True), ("taco", "1 1", "1", True),
    # testlib checkers/wcmp.cpp: readWord tokens (blanks: space, tab, CR, LF) equal
    ("testlib:wcmp", "1\n2", "1 2", True), ("testlib:wcmp", "a\fb", "a b", False), ("testlib:wcmp", "A", "a", False),
    # lcmp.cpp: readString lines, their stringstream tokens equal; only blanks may follow
    ("testlib:lcmp", "1   2\n", "1 2", True), ("testlib:lcmp", "1\n2", "1 2", False), ("testlib:lcmp", "1 2\n\n\n", "1 2", True),
    ("testlib:lcmp", "1\v2", "1 2", True),
    # fcmp.cpp: readString lines equal as text (a CR before LF is not part of the line)
    ("testlib:fcmp", "a b\r\n", "a b\n", True), ("testlib:fcmp", "a b ", "a b", False), ("testlib:fcmp", "a\n", "a", True),
    # ncmp.cpp: readLong (stringToLongLong: no '+', no leading zero, no -0, int64) in order, same count
    ("testlib:ncmp", "1 2 3", "1\n2\n3", True), ("testlib:ncmp", "007", "7", False), ("testlib:ncmp", "-0", "0", False),
    ("testlib:ncmp", "9223372036854775808", "9223372036854775807", False), ("testlib:ncmp", "1 2", "1", False),
    # uncmp.cpp: sorted sequences equal
    ("testlib:uncmp", "3 1 2", "1 2 3", True), ("testlib:uncmp", "1 1 2", "1 2 2", False),
    # yesno.cpp: one word, YES or NO in any case, equal to the answer's; nothing after
    ("testlib:yesno", "yes", "YES", True), ("testlib:yesno", "yes yes", "YES", False), ("testlib:yesno", "Y", "YES", False),
    ("testlib:yesno", "NO", "yes", False),
    # rcmp4/6/9.cpp: readDouble (stringToDouble, glibc sscanf) and doubleCompare(expected, result, EPS)
    ("testlib:rcmp4", "3.14165", "3.1416", True), ("testlib:rcmp6", "3.14165", "3.1416", False),
    ("testlib:rcmp6", "3.1415931", "3.1415926", True), ("testlib:rcmp9", "3.1415931", "3.1415926", False),
    ("testlib:rcmp9", "1000000000.9", "1000000000", True), ("testlib:rcmp6", "1e", "1", True),
    ("testlib:rcmp6", "inf", "1", False), ("testlib:rcmp6", "1e400", "1e301", True), ("testlib:rcmp6", "1 2", "1", False),
    ("testlib:rcmp6", "", "1", False), ("testlib:rcmp6", "0x1", "1", False),
    # hcmp.cpp: one token matching 0|-?[1-9][0-9]* equal as text
    ("testlib:hcmp", "123456789012345678901234567890", "123456789012345678901234567890", True),
    ("testlib:hcmp", "-0", "0", False), ("testlib:hcmp", "01", "1", False),
]


@pytest.mark.parametrize(("mode", "output", "expected", "want"), RULES)
def test_each_mode_follows_its_peers_rule(mode, output, expected, want):
    assert judge(mode, output, expected) is want


def test_testlib_verdicts_are_the_checkers_exit_classes():
    v = compare_modes.testlib_verdict
    assert v("yesno", "maybe", "YES")[0] == "pe" and v("yesno", "yes", "maybe")[0] == "fail"
    assert v("hcmp", "1", "1 2")[0] == "fail" and v("ncmp", "x", "1")[0] == "pe" and v("wcmp", "b", "a")[0] == "wa"
    assert v("lcmp", "1\n2\n3", "1\n2")[0] == "pe"  # extra information in the output file


def test_lines_is_todays_rule_exactly():
    for out, exp in pairs(2000, seed=7):
        for tol in (None, 1e-6):
            assert judge("lines", out, exp, tol) is stdout_matches(out, exp, tol), (out, exp, tol)


@pytest.mark.parametrize("mode", list(MODES))
def test_fed_in_pieces_as_whole(mode):
    """The runner feeds what the pipe gives: a byte at a time (a UTF-8 character split) or in
    odd chunks, the verdict is the whole output's."""
    for k, (out, exp) in enumerate(pairs(300, seed=11)):
        data = out.encode()
        m = matcher(mode, exp, 1e-6 if k % 2 else None)
        step = 1 + k % 5
        for i in range(0, len(data), step):
            m.feed(data[i:i + step])
        want = judge(mode, out, exp, 1e-6 if k % 2 else None)
        assert m.finish() is want, (mode, out, exp)
        m.restart()
        m.feed(data)
        assert m.finish() is want


def test_invalid_utf8_is_never_a_character():
    """surrogateescape: a byte no UTF-8 has stays apart from U+FFFD (no two byte strings meet)."""
    for mode in MODES:
        if mode == "lines":
            continue  # today's rule decodes with replacement, as before
        m = matcher(mode, "\ufffd")
        m.feed(b"\xff")
        assert not m.finish(), mode


def _verl_testing_util() -> Path | None:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "utils" / "reward_score" / "prime_code" / "testing_util.py"
    return p if p.is_file() else None


def test_prime_code_agrees_with_verls_own_testing_util(tmp_path):
    """verl's run_test, unchanged, in a process of its own (it calls reliability_guard), on
    generated pairs: 0 disagreements. COMPARE_PAIRS sets how many (bench: 10,000)."""
    peer = _verl_testing_util()
    if peer is None:
        if IN_CI:
            pytest.fail("verl is not installed: .ci/run installs it with `pip install --no-deps verl`")
        pytest.skip("verl not installed (pip install --no-deps verl)")
    sys.path.insert(0, str(ROOT / "bench"))
    from compare_agreement import run_python_peer  # noqa: PLC0415 - the bench's driver, shared

    ps = pairs(int(os.environ.get("COMPARE_PAIRS", "1000")), seed=3)
    theirs = run_python_peer("prime_code", peer, ps, tmp_path)
    assert len(theirs) == len(ps) and 0 < sum(theirs) < len(ps)
    bad = [(o, e, t) for (o, e), t in zip(ps, theirs, strict=True) if judge("prime_code", o, e) is not t]
    assert not bad, json.dumps(bad[:5])


def test_the_bench_runs_without_peers():
    """bench/compare_agreement.py says which peers it did not find (CI has none of them)."""
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "compare_agreement.py"), "--peers", "/nonexistent",
                          "--n", "10", "--only", "livecodebench,codecontests"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "livecodebench" in out and "peer not found" in out


@pytest.mark.parametrize("mode", list(MODES))
def test_hostile_outputs_cost_linear_time(mode):
    """A number grammar with two ways to split a digit run backtracks exponentially where a
    later token fails (five 30-digit tokens and an 'x' took 79 s in a first version of the
    testlib double check): every mode reads such outputs, and a 1 MB digit run, at once."""
    import time  # noqa: PLC0415

    hostile = ["\n".join(["1" * 30] * 40 + ["x"]), "1" * (1 << 20) + "x", ("1" * 30 + ".5e ") * 20000 + "x",
               "0x" + "f" * (1 << 20) + "q", "-" + "9" * 400 + "e-" + "9" * 400]
    t0 = time.monotonic()
    for out in hostile:
        for exp in ("1", out.replace("x", "1")):
            judge(mode, out, exp)
    assert time.monotonic() - t0 < 20, mode
