"""Equivalence families, run in-process on the pure check function (fast)."""

import pytest

from reward_server.grading.math.grade import check


def ok(pred: str, gold: str, **opts) -> bool:
    return check(pred, gold, opts)["reward"] == 1.0


@pytest.mark.parametrize(
    "pred,gold",
    [
        ("12,345", "12345"), ("-7", "-7"), ("+12", "12"), ("3.50", "3.5"), ("2 500 000", "2500000"),
        ("4,5", "4.5"), ("0,25", "0.25"), ("8.", "8"), (".75", "0.75"), ("007", "7"),
    ],
)
def test_integers_and_decimals(pred, gold):
    assert ok(pred, gold)


@pytest.mark.parametrize("pred,gold", [("12,346", "12345"), ("3.51", "3.5"), ("7", "-7"), ("2.0001", "2")])
def test_numbers_differ(pred, gold):
    assert not ok(pred, gold)


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"\frac{6}{8}", "3/4"), (r"\dfrac34", "0.75"), (r"-\tfrac{5}{2}", "-2.5"), ("7/21", r"\frac{1}{3}"),
        ("2 1/4", "9/4"), (r"3\frac{1}{2}", "3.5"), (r"0.\overline{3}", "1/3"), (r"0.1\overline{6}", r"\frac16"),
    ],
)
def test_fractions(pred, gold):
    assert ok(pred, gold)


def test_exact_rationals_compared_exactly():
    assert not ok(r"\frac{1}{3^{40}}", r"\frac{1}{3^{40}+1}")
    assert not ok(r"\frac{1}{100!}", r"\frac{1}{101!}")


@pytest.mark.parametrize(
    "pred,gold,expected",
    [("45\\%", "45%", True), ("45 percent", "0.45", True), ("45", "45\\%", True), ("0.45", "45", False)],
)
def test_percent(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_percent_strict_policy():
    assert not ok("45", "45\\%", percent="strict")
    assert ok("0.45", "45\\%", percent="strict")


@pytest.mark.parametrize("pred,gold", [("3.2e4", "32000"), (r"1.25 \times 10^{-2}", r"\frac{1}{80}")])
def test_scientific(pred, gold):
    assert ok(pred, gold)


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"\frac{2}{\sqrt{3}}", r"\frac{2\sqrt3}{3}"), (r"\sqrt{12}", r"2\sqrt{3}"), (r"\sqrt[3]{27}", "3"),
        (r"\sqrt{8}+\sqrt{2}", r"3\sqrt2"),
    ],
)
def test_radicals(pred, gold):
    assert ok(pred, gold)


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"\sin\frac{\pi}{6}", r"\frac12"), (r"\cos 0", "1"), (r"\log_3 81", "4"), (r"\ln e^2", "2"),
        (r"\frac{\pi}{4}", "0.785398163397448"), (r"\tan^2 x + 1", r"\sec^2 x"), (r"\cos 60^\circ", "0.5"),
    ],
)
def test_constants_and_trig(pred, gold):
    assert ok(pred, gold)


def test_decimal_tolerance_is_tight():
    assert not ok("3.14", r"\pi")
    assert ok("3.14", r"\pi", rel_tol=1e-3)


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("(a-b)(a+b)", "a^2-b^2", True), (r"\frac{x^2-1}{x-1}", "x+1", True), ("2(x+3)", "2x+6", True),
        ("x^2+2x", "x^2+3x", False), ("a+b", "a+c", False), ("m n", "nm", True),
    ],
)
def test_algebra(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("t = -4", "-4", True), ("-4", "t=-4", True), ("y = 3x - 1", "3x-1", True),
        ("2y = 6x - 2", "y = 3x - 1", True), ("3x - y - 1 = 0", "y = 3x - 1", True),
        ("y = 3x + 1", "y = 3x - 1", False), ("2a + b = 4", "4", False),
    ],
)
def test_equations(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("(2, 5)", "(2,5)", True), ("(5, 2)", "(2,5)", False), (r"\{5, 2\}", r"\{2,5\}", True),
        ("5, 2", "2, 5 and 7", False), ("7, 5, 2", "2, 5 and 7", True), ("(1,2),(3,4)", "(3,4),(1,2)", True), (r"x = \pm 3", "3, -3", True),
        (r"\pm 3", "3", False), ("1, 2", "1, 2, 3", False),
    ],
)
def test_tuples_and_sets(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("[2, 5)", "[2,5)", True), ("(2, 5]", "[2,5)", False), (r"(-\infty, 0) \cup (1, \infty)", r"(-\infty,0)\cup(1,\infty)", True),
        (r"x \in [3, \infty)", r"x \ge 3", True), (r"-3 < x \leq 4", r"-3 \le x \leq 4", False), ("-2x > 6", "x < -3", True),
        ("x > 3", "x < 3", False), (r"x \in (-3, 4]", r"-3 < x \leq 4", True), ("(-3, 4]", r"4 \ge x > -3", True),
    ],
)
def test_intervals_and_inequalities(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold",
    [(r"-3 < x \leq 4", "(-3, 4]"), (r"|t| \le 2", "[-2, 2]"), (r"x \ge 1", r"[1, \infty)"), ("x > 0", r"x \in (0, \infty)")],
)
def test_interval_reference_needs_interval_answer(pred, gold):
    # interval_form="required" (default): the reference asks for interval notation
    assert not ok(pred, gold)
    assert ok(pred, gold, interval_form="either")
    assert not ok(r"x \ge 2", r"[1, \infty)", interval_form="either")


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("10, 4, -2", "10, 4, -2", True), ("4, 10, -2", "10, 4, -2", False), ("4, .1, 2", "0.1, 4, 2", False),
        (r"\frac12, 3", "0.5, 3", True), ("(10, 4, -2)", "10, 4, -2", True),
        # marked as a set of answers: and/or/;, braces, +-, assignments, lists of tuples
        ("2, 1", "1 and 2", True), ("3, 1, 2", "1, 2; 3", True), (r"\{2, 1\}", r"\{1, 2\}", True),
        ("-3, 3", r"\pm 3", True), (r"\pm 3", "-3, 3", True), (r"\pm 3", "-3, 4", False), ("-8, 4", "a = 4, -8", True), ("y = 2, x = 1", "x = 1, y = 2", True),
        ("(3, 4), (1, 2)", "(1, 2), (3, 4)", True), ("(4, 3), (1, 2)", "(1, 2), (3, 4)", False),
    ],
)
def test_list_order_follows_the_reference(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_list_order_from_reference_context_and_options():
    # a boxed list introduced as the solutions of one unknown, or several boxes, is a set
    assert ok("-2, 1", r"so the solutions are $n = \boxed{1,-2}$.")
    assert ok("-2, 1", r"The roots are $\boxed{1, -2}$.")
    assert ok(r"\boxed{-2, 1}", r"\boxed{1} and \boxed{-2}")
    assert not ok("-2, 1", r"The coefficients are $\boxed{1, -2}$.")
    assert ok("4, 10, -2", "10, 4, -2", list_order="unordered")
    assert not ok("(3, 4), (1, 2)", "(1, 2), (3, 4)", list_order="ordered")
    assert not ok(r"\{2, 1\}", r"\{1, 2, 3\}", list_order="ordered")
    assert ok(r"\{2, 1\}", r"\{1, 2\}", list_order="ordered")  # a set stays a set


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"[2^{2^{-1000}}, \infty)", r"[1, \infty)"), (r"2^{\frac{1}{2^{500}}}", "1"),
        (r"\sqrt{10^{100}+1}", "10^{50}"), (r"\frac{314159265358979323846264338}{10^{26}}", r"\pi"),
        (r"1 + 10^{-40}", "1"),
    ],
)
def test_exact_values_confirmed_at_high_precision(pred, gold):
    assert not ok(pred, gold)
    assert ok(pred, gold, exact_confirm=False) or pred == r"1 + 10^{-40}"


@pytest.mark.parametrize(
    "pred,gold",
    [(r"\sqrt{2}+\sqrt{3}", r"\sqrt{5+2\sqrt{6}}"), (r"\frac{\log 8}{\log 2}", "3"), (r"4\arctan 1", r"\pi"),
     (r"\cos\frac{\pi}{5}", r"\frac{1+\sqrt5}{4}"), (r"2^{10^{3}}", r"4^{500}")],
)
def test_exact_confirmation_keeps_true_equalities(pred, gold):
    assert ok(pred, gold)


def test_matrices():
    m = r"\begin{pmatrix} 1 & \frac12 \\ 0 & 3 \end{pmatrix}"
    assert ok(r"\begin{bmatrix} 1 & 0.5 \\ 0 & 3 \end{bmatrix}", m)
    assert not ok(r"\begin{bmatrix} 1 & 0.5 \\ 3 & 0 \end{bmatrix}", m)
    assert not ok(r"\begin{pmatrix} 1 & 0.5 & 0 & 3 \end{pmatrix}", m)


@pytest.mark.parametrize("pred,gold,expected", [("3-4i", "3 - 4i", True), ("(1+i)^2", "2i", True), ("3+4i", "3-4i", False)])
def test_complex(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        (r"72^\circ", "72", True), (r"72^{\circ}", r"\frac{2\pi}{5}", True), ("72 degrees", r"72^\circ", True),
        (r"60^\circ", "72", False),
    ],
)
def test_degrees(pred, gold, expected):
    assert ok(pred, gold) is expected


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"42 \text{ meters}", "42"), ("42 square feet", "42"), (r"42\,\mathrm{kg}", "42"), (r"\$42", "42"),
        ("42 dollars", "42"), (r"\text{Tuesday}", "Tuesday"), (r"\textbf{(B)}", "B"),
    ],
)
def test_units_and_text(pred, gold):
    assert ok(pred, gold)


def test_text_differs():
    assert not ok(r"\text{Monday}", "Tuesday")
    assert not ok("B", "C")


def test_empty_never_matches():
    assert not ok("", "")
    assert not ok(r"\boxed{}", "")
    assert check("", "5", {})["status"] == "no_answer"
