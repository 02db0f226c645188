"""Answers a careful judge refuses, and their honest neighbours that must still pass.

Four families of false positive: a hedged or negated answer graded by its last number ("7, not 5"
equal to 5), identities that hold only for positive values (|x| = x), multiplier words dropped as
units (2 million = 2), and an integer reference met within a relative tolerance (123456700.0 =
123456789). In-process on the pure check function, plus a few through /v1/score on a live server."""

from __future__ import annotations

import time

import httpx
import pytest

from reward_server.grading.math.grade import check


def ok(pred: str, gold: str, **opts) -> bool:
    return check(pred, gold, opts)["reward"] == 1.0


# --------------------------------------------------------------------------- hedged and negated answers

NEGATED = [
    ("The answer is 7, not 5.", "5"), ("The answer is 7 rather than 5.", "5"), ("The answer is 7 instead of 5.", "5"),
    ("The answer is 7 (not 5).", "5"), ("The answer is $7$, not $5$.", "5"), ("The answer is not 5, it is 7.", "5"),
    ("The answer isn't 5.", "5"), ("The answer is not 5.", "5"), ("Final answer: 7, and not 5", "5"),
    ("7, not 5", "5"), ("#### 7, not 5", "5"), ("The answer is 7, but not 5.", "5"),
    ("The answer is definitely not equal to 5.", "5"), ("I think it's 7, not 5.", "5"), ("So we get seven, not five.", "5"),
    ("After all that, the count is 7 and certainly not 5", "5"), ("The answer is 5, not sure though", "5"),
]


@pytest.mark.parametrize(("pred", "gold"), NEGATED)
def test_a_negated_value_is_not_the_answer(pred, gold):
    assert not ok(pred, gold)


ALTERNATIVES = [
    ("The answer is 5 or 7.", "7"), ("The answer is 5 or 7.", "5"), ("The answer is either 5 or 7.", "7"),
    ("The answer is either 5 or 7.", "5"), ("The answer is $5 \\text{ or } 7$.", "7"), ("The answer is 5. Or maybe 7.", "7"),
    ("The answer is 5. Or maybe 7.", "5"), ("The answer is 5, or possibly 7.", "5"), ("The answer is 5 (or perhaps 7).", "5"),
    ("5 or 7", "7"), ("5 or 7", "5"), ("Hmm, it could be 4 or 5", "5"), ("It is probably 6, maybe 5", "5"),
    ("The answer is 5 if n is even.", "5"), ("The answer is 5 unless n = 0.", "5"), ("The answer is 5 or so.", "5"),
    ("Answer: 5? No, 7.", "5"), ("\\boxed{5}. Actually, it is 7.", "5"), ("\\boxed{5} (or \\boxed{7})", "7"),
]


@pytest.mark.parametrize(("pred", "gold"), ALTERNATIVES)
def test_a_hedge_between_values_is_not_the_answer(pred, gold):
    assert not ok(pred, gold)


BOUNDED = [
    ("The answer is at least 5.", "5"), ("The answer is at most 5.", "5"), ("The answer is between 3 and 5.", "5"),
    ("The answer is more than 5.", "5"), ("The answer is $x > 5$.", "5"), ("The answer is $x \\neq 5$.", "5"),
    ("The answer is $x \\ge 5$.", "5"), ("There are at least 12 of them", "12"), ("It lies between 3 and 12", "12"),
    ("It goes from 3 to 12", "12"), ("so the value is less than 12", "12"), ("\\boxed{5 \\text{ or more}}", "5"),
    ("\\boxed{5 \\text{ at most}}", "5"), ("5 at most", "5"), ("\\boxed{12 \\text{ or fewer}}", "12"),
    ("\\boxed{5} or more", "5"), ("There are 12 or fewer", "12"), ("\\boxed{5} and above", "5"), ("\\boxed{5} at least", "5"),
    ("\\boxed{\\text{at least } 5}", "5"), ("\\boxed{\\geq 5}", "5"), ("\\boxed{5 \\text{ not } 7}", "5"),
]


@pytest.mark.parametrize(("pred", "gold"), BOUNDED)
def test_a_bound_is_not_the_value(pred, gold):
    assert not ok(pred, gold)


BOXES = [
    ("\\boxed{5} or \\boxed{7}", "7"), ("\\boxed{5} or \\boxed{7}", "5"), ("\\boxed{7}, not \\boxed{5}", "5"),
    ("The answer is not \\boxed{5}.", "5"), ("The answer isn't $\\boxed{5}$.", "5"), ("$x \\geq \\boxed{5}$", "5"),
    ("at least \\boxed{5}", "5"), ("\\boxed{5} or maybe 7", "7"), ("\\boxed{5} or maybe 7", "5"),
    ("\\boxed{5}, or possibly $7$.", "5"), ("\\boxed{5} if n is even and \\boxed{7} otherwise", "7"),
    ("\\boxed{5} if n is even and \\boxed{7} otherwise", "5"), ("\\boxed{7} otherwise", "7"), ("x = \\boxed{3} or x = \\boxed{-1}", "-1"), ("\\boxed{5 \\text{ or } 7}", "7"),
]


@pytest.mark.parametrize(("pred", "gold"), BOXES)
def test_a_hedged_or_negated_box_is_not_the_answer(pred, gold):
    assert not ok(pred, gold)


@pytest.mark.parametrize("cue", ["not", "rather than", "instead of", "and not", "but not"])
@pytest.mark.parametrize("form", ["The answer is 11 {cue} 13.", "11 {cue} 13", "\\boxed{11} {cue} \\boxed{13}",
                                  "Final answer: $11$ {cue} $13$"])
def test_negation_cues_in_every_answer_form(cue, form):
    pred = form.replace("{cue}", cue)
    assert not ok(pred, "13"), pred


@pytest.mark.parametrize("cue", ["or", "or maybe", "or perhaps", "or possibly", "or probably"])
@pytest.mark.parametrize("form", ["The answer is 11 {cue} 13.", "11 {cue} 13", "\\boxed{11} {cue} 13",
                                  "The final answer is $11$ {cue} $13$."])
def test_alternative_cues_in_every_answer_form(cue, form):
    pred = form.replace("{cue}", cue)
    assert not ok(pred, "13"), pred
    assert not ok(pred, "11"), pred


HONEST = [
    ("The answer is 5.", "5"), ("The answer is 7, not 5.", "7"), ("The answer is 7 rather than 5.", "7"),
    ("The answer is 7 instead of 5.", "7"), ("The answer is 7 (not 5).", "7"), ("The answer is not 5, it is 7.", "7"),
    ("7, not 5", "7"), ("\\boxed{7}, not \\boxed{5}", "7"), ("The answer is 1/2 or 0.5.", "1/2"),
    ("\\boxed{\\frac{1}{2}} or \\boxed{0.5}", "0.5"), ("x = \\boxed{3} or x = \\boxed{-1}", "3, -1"),
    ("The solutions are $x = 3$ or $x = -1$.", "3, -1"), ("\\boxed{x < -2 \\text{ or } x > 2}", "|x| > 2"),
    ("So we get 3 or 4 apples each, so 12 in total.", "12"), ("Since n is not prime the answer is \\boxed{5}", "5"),
    ("The final answer is $5$. I hope it is correct.", "5"), ("\\boxed{5}\n\nIf you have any questions, just ask.", "5"),
    ("It is not 4. The answer is \\boxed{5}.", "5"), ("The answer is \\boxed{5}, not 7.", "5"),
    ("The answer is $\\text{does not exist}$.", "\\text{does not exist}"), ("There are 12 ways.", "12"),
    ("The count is 12, which is not a prime.", "12"), ("\\boxed{x \\neq 3}", "x \\ne 3"),
    ("\\boxed{5}. No other value works.", "5"), ("\\boxed{5}. Actually, 5 is the only value.", "5"),
    ("\\boxed{5} or \\boxed{5.0}", "5"),
]


@pytest.mark.parametrize(("pred", "gold"), HONEST)
def test_honest_answers_near_the_hedges_still_pass(pred, gold):
    assert ok(pred, gold)


def test_references_are_not_read_as_hedges():
    """A data set's own reference text may say "or" and "between" before its box."""
    assert ok("\\boxed{20}", "Solving for $x$ yields $x=1/5$, or $\\boxed{20}$ percent.")
    assert ok("\\boxed{12 \\text{ and } 13}", "so the sum is located between $\\boxed{12\\text{ and }13}$.")


# --------------------------------------------------------------------------- identities for positive values only

ONLY_POSITIVE = [
    ("|x|", "x"), ("x", "|x|"), ("\\sqrt{x^2+2x+1}", "x+1"), ("\\sqrt{(x+1)^2}", "x+1"), ("\\sqrt{x^2}", "x"),
    ("x", "\\sqrt{x^2}"), ("\\lfloor x \\rfloor", "x"), ("\\lceil x \\rceil", "x"), ("\\frac{|x|}{x}", "1"),
    ("\\frac{x}{|x|}", "1"), ("|x| y", "|xy|"), ("|x+y|", "x+y"), ("\\arcsin(\\sin x)", "x"), ("\\arctan(\\tan x)", "x"),
    ("2\\ln x", "\\ln(x^2)"), ("\\sqrt{x}\\sqrt{y}", "\\sqrt{xy}"), ("\\sqrt{x^2 y^2}", "xy"), ("|x|^3", "x^3"),
    ("\\sqrt{4x^2}", "2x"), ("x^2 + |x|", "x^2 + x"), ("\\ln x", "\\ln|x|"), ("\\lfloor x \\rfloor + 1", "x + 1"),
    ("\\lfloor 2x \\rfloor", "2\\lfloor x \\rfloor"),
]


@pytest.mark.parametrize(("pred", "gold"), ONLY_POSITIVE)
def test_identities_that_hold_only_for_positive_values_are_rejected(pred, gold):
    assert not ok(pred, gold)


def test_an_equation_with_a_positive_only_identity_is_rejected():
    assert not ok("y = x", "y = |x|")
    assert not ok("y = \\sqrt{(x-1)^2}", "y = x - 1")
    assert ok("y = \\sqrt{x^2}", "y = |x|")


TRUE_IDENTITIES = [
    ("\\sqrt{x^2}", "|x|"), ("|x|", "\\sqrt{x^2}"), ("(x-1)(x+1)", "x^2-1"), ("x^2-1", "(x-1)(x+1)"),
    ("\\frac{x^2-1}{x-1}", "x+1"), ("\\sqrt{x^4}", "x^2"), ("|x|^2", "x^2"), ("(x+1)^2", "x^2+2x+1"),
    ("\\binom{n}{2}", "\\frac{n(n-1)}{2}"), ("n \\cdot (n-1)!", "n!"), ("2\\sin x \\cos x", "\\sin 2x"),
    ("\\frac{\\sqrt{x}}{x}", "\\frac{1}{\\sqrt{x}}"), ("\\ln(x^2)", "2\\ln x"), ("\\ln(xy)", "\\ln x + \\ln y"),
    ("|x| \\cdot |y|", "|xy|"), ("\\frac{1}{x} + \\frac{1}{y}", "\\frac{x+y}{xy}"), ("\\sqrt{1-x^2}", "\\sqrt{(1-x)(1+x)}"),
    ("e^{x+y}", "e^x e^y"), ("\\tan(\\arctan x)", "x"), ("x^{1/3}", "\\sqrt[3]{x}"),
]


@pytest.mark.parametrize(("pred", "gold"), TRUE_IDENTITIES)
def test_true_identities_still_pass(pred, gold):
    assert ok(pred, gold)


# --------------------------------------------------------------------------- multiplier words

@pytest.mark.parametrize(("pred", "gold"), [
    ("2 \\text{ million}", "2"), ("2 million", "2"), ("The answer is 2 million.", "2"), ("3 thousand", "3"),
    ("2 dozen", "2"), ("1.5 billion", "1.5"), ("2 millions", "2"), ("4 \\text{ million dollars}", "4"),
    ("7 trillion", "7"), ("5 hundred", "5"), ("2 million", "2000"), ("2 \\text{ thousand}", "2000000"),
    ("2k", "2000"),  # a single letter stays a variable: 2k is 2*k
])
def test_multiplier_words_are_not_dropped(pred, gold):
    assert not ok(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), [
    ("2 million", "2000000"), ("2 \\text{ million}", "2000000"), ("The answer is 2 million.", "2000000"),
    ("2.5 million", "2500000"), ("3 thousand", "3000"), ("two million", "2000000"), ("1.2 trillion", "1200000000000"),
    ("2 dozen", "24"), ("5 hundred", "500"), ("4 \\text{ million dollars}", "4000000"), ("2000000", "2 \\text{ million}"),
    ("3 billion", "3 \\times 10^9"), ("\\$2 million", "2000000"), ("\\text{2 million}", "2000000"),
    ("2\\,\\text{million}", "2000000"), ("2 \\mathrm{million}", "2000000"),
])
def test_multiplier_words_scale_the_number(pred, gold):
    assert ok(pred, gold)


def test_a_reference_with_a_multiplier_word_needs_the_scaled_value():
    assert not ok("\\boxed{2}", "2 \\text{ million}")


# --------------------------------------------------------------------------- integer references

@pytest.mark.parametrize(("pred", "gold"), [
    ("123456700.0", "123456789"), ("123456789.1", "123456789"), ("123456788.9999", "123456789"), ("4.9999999", "5"),
    ("5.000001", "5"), ("1.2345679 \\times 10^8", "123456789"), ("1.23457e8", "123456789"), ("999999.9999", "1000000"),
    ("123456700", "123456789.0"), ("\\boxed{2.0000001}", "2"), ("49.99999\\%", "50"),
])
def test_an_integer_reference_is_met_exactly(pred, gold):
    assert not ok(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), [
    ("123456789.0", "123456789"), ("123456789", "123456789.0"), ("1.23456789 \\times 10^{8}", "123456789"),
    ("5.00", "5"), ("2.5 \\times 2", "5"), ("1.5e6", "1500000"), ("50.0\\%", "50\\%"), ("123,456,789.0", "123456789"),
])
def test_a_decimal_that_is_exactly_the_integer_passes(pred, gold):
    assert ok(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), [
    ("0.3333333", "\\frac{1}{3}"), ("0.0833333333333333", "\\frac{1}{12}"), ("9.42477796", "3\\pi"),
    ("1.4142136", "\\sqrt{2}"), ("0.5000001", "\\frac12"),
])
def test_non_integer_references_keep_their_tolerance(pred, gold):
    assert ok(pred, gold)


# --------------------------------------------------------------------------- through /v1/score

@pytest.fixture(scope="module")
def url(shared_servers) -> str:
    """One live server: the math grader runs in the server's own worker pool, not in a sandbox host."""
    return shared_servers.get(sandbox="bwrap").url


def test_false_positives_over_http(url):
    cases = [
        ("The answer is 7, not 5.", "5", 0.0), ("The answer is 7, not 5.", "7", 1.0), ("The answer is 5.", "5", 1.0),
        ("\\boxed{5} or \\boxed{7}", "7", 0.0), ("\\boxed{|x|}", "x", 0.0), ("\\boxed{\\sqrt{x^2}}", "|x|", 1.0),
        ("\\boxed{\\sqrt{x^2+2x+1}}", "x+1", 0.0), ("\\boxed{(x-1)(x+1)}", "x^2-1", 1.0),
        ("\\boxed{2 \\text{ million}}", "2", 0.0), ("\\boxed{2 \\text{ million}}", "2000000", 1.0),
        ("\\boxed{123456700.0}", "123456789", 0.0), ("\\boxed{123456789.0}", "123456789", 1.0),
    ]
    items = [{"id": str(i), "completion": c, "task": {"type": "math", "answer": a}} for i, (c, a, _) in enumerate(cases)]
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=120)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["reward"] for x in results] == [want for _, _, want in cases], results
    assert all(x["status"] == "ok" and x["detail"]["kind"] == "math" for x in results), results


@pytest.mark.parametrize("text", [
    "The answer is " + "7, not " * 20000 + "5.", "The answer is 7" + " rather" * 30000 + " than 5.",
    "\\boxed{1} not " * 5000 + "\\boxed{2}", "It is between " + "between " * 20000 + "5 and 7",
    "So " + " " * 100000 + "or 5", "\\boxed{5}" + " " * 100000 + "or more", "I get " + "not " * 30000 + "5",
    "The answer is 5" + "$" * 50000 + " or maybe 7", "x \\ge " * 20000 + "\\boxed{5}",
])
def test_the_hedge_rules_are_linear_on_hostile_text(text):
    """No cue rule may rescan a long completion from every position (no timers in process here)."""
    t0 = time.perf_counter()
    check(text, "5", {})
    assert time.perf_counter() - t0 < 2.0
