"""Second-round notations (issue 18): one block per failure class, each with the negatives that must
stay false, and the worst input of each new rule answered fast with nothing executed."""

import os
import time

import pytest

from reward_server.grading.math import MathGrader
from reward_server.grading.math.extract import extract
from reward_server.grading.math.grade import check
from reward_server.grading.math.numwords import replace_number_words


def ok(pred: str, gold: str, **opts) -> bool:
    return check(pred, gold, opts)["reward"] == 1.0


def cases(*rows):
    return pytest.mark.parametrize("pred,gold,expected", rows)


# ---------------------------------------------------------------- numbers


@cases(
    (r"7\,250", "7250", True), (r"1\,000\,000", "10^6", True), (r"2{,}500", "2500", True),
    ("1\u202f234\u202f567", "1234567", True), ("8\u2009192", "8192", True),
    ("It costs 2 500 dollars in total.", "2500", True), ("The population reached 1\u202f234\u202f567 people.", "1234567", True),
    (r"7\,250", "725", False), (r"3\,14", "314", False), (r"12\,34", "1234", False),
    ("It costs 2 500 dollars in total.", "500", False), ("Pages 12 and 345 were torn.", "12345", False),
)
def test_thousands_separators(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    ("Thus we need three hundred and twelve tiles.", "312", True), ("The answer is seven.", "7", True),
    ("twenty-one", "21", True), ("The answer is two thirds.", r"\frac23", True), ("negative four", "-4", True),
    ("She ends up with nineteen marbles.", "19", True), ("one thousand two hundred five", "1205", True),
    ("seven", "8", False), ("There are 4 boxes, one of them red.", "4", True), ("One of the 5 cats is black.", "1", False),
    ("Therefore there are 12 ways for the three given conditions.", "12", True),
    (r"\text{none}", "1", False), ("the second one", "2", False),
)
def test_number_words(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_number_word_grammar():
    assert replace_number_words("ninety nine and two hundred") == "99 and 200"
    assert replace_number_words("five million three thousand") == "5003000"
    assert replace_number_words("twelve twenty") == "12 20"  # two numbers, not 1220
    assert replace_number_words("a hundred, the third") == ""


# ---------------------------------------------------------------- sets and intervals


@cases(
    (r"\mathbb{R}", r"(-\infty, \infty)", True), (r"\mathbb R", r"(-\infty,\infty)", True), ("ℝ", r"\mathbb{R}", True),
    (r"\mathbb{Z}", r"\mathbb{Z}", True), (r"\mathbb{R}", r"\mathbb{Z}", False), (r"\mathbb{Z}^+", r"\mathbb{N}", True),
    (r"\mathbb{R}^+", r"(0,\infty)", True), (r"\mathbb{R}^{-}", r"(-\infty,0]", False),
    (r"\mathbb{R} \setminus \{2\}", r"(-\infty,2)\cup(2,\infty)", True),
    (r"\mathbb{R} \setminus \{2\}", r"(-\infty,2)\cup(3,\infty)", False),
    (r"\mathbb{R} - \{-1, 1\}", r"(-\infty,-1)\cup(-1,1)\cup(1,\infty)", True),
    (r"\mathbb{R} \backslash \{0\}", r"(-\infty,0]\cup(0,\infty)", False),
    (r"[0,1]^c", r"(-\infty,0)\cup(1,\infty)", True), (r"\complement_{\mathbb{R}} [0, 1)", r"(-\infty,0)\cup[1,\infty)", True),
    (r"[0,1]^c", r"(-\infty,0]\cup(1,\infty)", False),
    (r"x \notin [1, 2]", r"(-\infty,1)\cup(2,\infty)", True), ("x ∉ (0,1)", r"(-\infty,0]\cup[1,\infty)", True),
    (r"\mathbb{R}\setminus[1,2]", r"(-\infty,1)\cup(2,\infty)", True), (r"x \notin [1, 2]", r"(-\infty,1]\cup(2,\infty)", False),
)
def test_number_sets_and_complements(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    (r"\{x \mid x \geq 3\}", r"[3,\infty)", True), (r"\{x : x < 0 \text{ or } x > 4\}", r"(-\infty,0)\cup(4,\infty)", True),
    (r"\{x \in \mathbb{R} \mid x \ne 5\}", r"\mathbb{R}\setminus\{5\}", True), (r"\{x | x^2 = 9\}", r"\{-3, 3\}", True),
    (r"\{t \mid -1 < t \le 2\}", r"(-1, 2]", True), (r"\{x \in \mathbb{Z} \mid 0 < x < 4\}", r"\{1, 2, 3\}", True),
    (r"\{x \mid x > 3\}", r"[3,\infty)", False), (r"\{x \mid x^2 < 4\}", r"(-2, 2]", False),
    (r"\{x \in \mathbb{Z} \mid 0 < x < 4\}", r"(0, 4)", False),
)
def test_set_builder(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    (r"x < -2 \text{ or } x > 2", r"|x| > 2", True), (r"x \le -1 \lor x \ge 1", r"|x| \ge 1", True),
    (r"x<-3 \text{ or } x>3", r"x < -3 \text{ or } x > 3", True), ("x < -3 or x > 3", r"|x| > 3", True),
    (r"(-\infty,-3)\cup(3,\infty)", r"x < -3 \text{ or } x > 3", True), (r"x > 1 \text{ and } x < 4", "1 < x < 4", True),
    (r"x \in (-\infty,-3)\cup(3,\infty)", r"|x|>3", True),
    (r"x < -2 \text{ or } x > 2", r"|x| \ge 2", False), (r"(-\infty,-3]\cup(3,\infty)", r"x < -3 \text{ or } x > 3", False),
    (r"x < -3 \text{ or } x > 2", r"|x| > 3", False), (r"x < -2 \text{ and } x > 2", r"|x| > 2", False),
)
def test_inequalities_joined_by_or(pred, gold, expected):
    assert ok(pred, gold) is expected


# interval_form="union" (default): an inequality answer stands for a set reference that is not one
# interval (a union of pieces, excluded points); a single interval reference keeps asking for
# interval notation (a chain or one-sided inequality is wrong there, as in "required").
@cases(
    (r"|x| > 2", r"(-\infty,-2)\cup(2,\infty)", True), (r"x < -3 \text{ or } x > 3", r"(-\infty,-3)\cup(3,\infty)", True),
    (r"y \le -1 \lor y \ge 4", r"(-\infty,-1]\cup[4,\infty)", True), ("t < 0 or t > 1", r"(-\infty,0)\cup(1,\infty)", True),
    (r"|2x - 1| \geq 5", r"(-\infty,-2]\cup[3,\infty)", True), (r"x \neq 5", r"\mathbb{R}\setminus\{5\}", True),
    (r"x \ne -1", r"(-\infty,-1)\cup(-1,\infty)", True), (r"x^2 > 9", r"x \in (-\infty,-3)\cup(3,\infty)", True),
    (r"a < -1 \vee 0 < a \le 2", r"(-\infty,-1)\cup(0,2]", True), (r"x < 1 \text{ or } x > 1", r"\mathbb{R}\setminus\{1\}", True),
    (r"So the inequality holds when \(x<-2\) or \(x>2\).", r"\{x \mid |x| > 2\}", True),
    # wrong unions, endpoints, open vs closed ends, variables
    (r"|x| > 3", r"(-\infty,-2)\cup(2,\infty)", False), (r"x < -3 \text{ or } x > 2", r"(-\infty,-3)\cup(3,\infty)", False),
    (r"x \le -3 \text{ or } x > 3", r"(-\infty,-3)\cup(3,\infty)", False), (r"|x| \ge 2", r"(-\infty,-2)\cup(2,\infty)", False),
    (r"x < -3 \text{ and } x > 3", r"(-\infty,-3)\cup(3,\infty)", False), (r"x \ne 4", r"\mathbb{R}\setminus\{5\}", False),
    (r"x < -1 \text{ or } x > 4", r"(-\infty,-1)\cup(2,3)\cup(4,\infty)", False), (r"x > 3", r"(-\infty,-3)\cup(3,\infty)", False),
    (r"x < -2 \text{ or } y > 2", r"(-\infty,-2)\cup(2,\infty)", False), (r"x < -2 \text{ or } y > 2", r"|x| > 2", False),
    (r"t < -2 \text{ or } t > 2", r"x \in (-\infty,-2)\cup(2,\infty)", False), (r"y \ne 3", r"x \in \mathbb{R}\setminus\{3\}", False),
    (r"|x| < 2", r"(-\infty,-2)\cup(2,\infty)", False), (r"x^2 \ge 9", r"(-\infty,-3)\cup(3,\infty)", False),
    # a single interval reference: chains, one-sided and |x| < a inequalities are not interval notation
    (r"-2 \le x \le 7", r"x \in [-2,7]", False), (r"x \ge 1", r"[1,\infty)", False), (r"|x| < 2", "(-2,2)", False),
    (r"x < 0 \text{ or } 0 \le x < 3", r"(-\infty,3)", False), (r"x > 1 \text{ and } x < 4", "(1, 4)", False),
    # a set-builder reference states conditions itself: an equivalent inequality answers it
    (r"-2 \le x \le 7", r"\{x \mid -2 \le x \le 7\}", True), (r"x \geq 3", r"\{x : x \ge 3\}", True),
    (r"-2 < x \le 7", r"\{x \mid -2 \le x \le 7\}", False), (r"x > 3", r"\{x : x \ge 3\}", False),
)
def test_inequality_answers_for_set_references(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    # comma lists of conditions on one unknown: their intersection, or their union when that is empty
    (r"x > 0, x \neq 1", r"(0,1)\cup(1,\infty)", True), (r"x < -2,\ x > 2", r"(-\infty,-2)\cup(2,\infty)", True),
    (r"x > 0, x \neq 2", r"(0,1)\cup(1,\infty)", False), (r"x \ge 0, x \ne 1", r"(0,1)\cup(1,\infty)", False),
    (r"x > 0, y \neq 1", r"(0,1)\cup(1,\infty)", False), (r"x \ge 1, x \le 3", r"1 \le x \le 3", True),
    # memberships joined by "or" are the union (set notation)
    (r"x \in (-\infty,-2) \text{ or } x \in (2,\infty)", r"(-\infty,-2)\cup(2,\infty)", True),
    (r"x \in (-\infty,-2] \lor x \in (2,\infty)", r"(-\infty,-2)\cup(2,\infty)", False),
    (r"x \in (-\infty,-2) \text{ or } y \in (2,\infty)", r"(-\infty,-2)\cup(2,\infty)", False),
)
def test_condition_lists_and_memberships(pred, gold, expected):
    assert ok(pred, gold) is expected


U2 = r"(-\infty,-2)\cup(2,\infty)"


@cases(
    # infinite ends of a chain are no bounds
    (r"-\infty < x < -2 \text{ or } 2 < x < \infty", U2, True), (r"-\infty < x \le -2 \text{ or } 2 < x < \infty", U2, False),
    # excluded points written with +-, a union with a point
    (r"x \neq \pm 1", r"\mathbb{R}\setminus\{-1,1\}", True), (r"x \neq \pm 1", r"\mathbb{R}\setminus\{-1,2\}", False),
    (r"x < 0 \text{ or } x = 1", r"(-\infty, 0) \cup \{1\}", True), (r"x < 0 \text{ or } x = 2", r"(-\infty, 0) \cup \{1\}", False),
    (r"x \le 0 \text{ or } x = 1", r"(-\infty, 0) \cup \{1\}", False),
    # spacing, symbols and a capital U written for the union
    (r"x < -2 \hspace{1em}\text{or}\hspace*{1em} x > 2", U2, True), (r"x \leqq -2 \text{ or } x \geqq 2", r"(-\infty,-2]\cup[2,\infty)", True),
    (r"x<-2 \text{ or } x>2 \text{.}", U2, True), (r"x < -2 \text{ or } x > 2", r"(-\infty,-2) U (2,\infty)", True),
    (r"x < -2 \text{ or } x > 2", r"(-\infty,-2)\bigcup(2,\infty)", True), (r"x < -2 \text{ or } x > 3", r"(-\infty,-2) U (2,\infty)", False),
    # boxes joined by "or", prose leads
    (r"so \boxed{x < -2} \text{ or } \boxed{x > 2}", U2, True), (r"so \boxed{x < -2} \text{ or } \boxed{x > 3}", U2, False),
    (r"\boxed{x < -2} \text{ and } \boxed{x > 2}", U2, False),
    (r"So $x \in (-\infty, -2)$ or $x \in (2, \infty)$.", U2, True), (r"Thus $x<-2$ or $x>3$.", U2, False),
    # a bare list of intervals, one of which cannot be a point (an infinite end, mixed brackets)
    (r"(-\infty,-2) \text{ or } (2,\infty)", U2, True), (r"(-\infty,-2), (2,\infty)", U2, True),
    (r"(-\infty,-2) \text{ or } (2,\infty)", r"|x| > 2", True), (r"(1,2] \text{ or } (3,4)", r"(1,2]\cup(3,4)", True),
    (r"(-\infty,-2] \text{ or } (2,\infty)", U2, False), (r"(-\infty,-2) \text{ or } (3,\infty)", r"|x| > 2", False),
    (r"(1,2) \text{ or } (3,4)", r"(1,2)\cup(3,4)", False),
    # ISO 31-11 / French brackets: ]a, b[ is open, [a, b[ right-open
    (r"x<-2 \text{ or } x>2", r"]-\infty,-2[\cup]2,+\infty[", True), (r"]-\infty,-2[\cup]2,+\infty[", U2, True),
    (r"[0, 1[", "[0,1)", True), (r"]0, 1]", "(0,1]", True), (r"]0, 1]", "[0,1]", False), (r"]-\infty,-2]\cup]2,+\infty[", U2, False),
    ("[1,2],[3,4]", "[1,2],[3,4]", True), ("(1,2], [3,4)", "(1,2], [3,4)", True),
)
def test_more_union_notations(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_interval_form_policies():
    union, single = (r"x < -3 \text{ or } x > 3", r"(-\infty,-3)\cup(3,\infty)"), (r"-2 \le x \le 7", r"[-2,7]")
    assert ok(*union) and ok(*union, interval_form="union") and ok(*union, interval_form="either")
    assert not ok(*union, interval_form="required")
    assert not ok(*single) and not ok(*single, interval_form="required") and ok(*single, interval_form="either")
    assert not ok(single[0], r"\{x \mid -2 \le x \le 7\}", interval_form="required")
    assert not ok(r"x < -3 \text{ or } x > 4", union[1], interval_form="either")
    # an inequality reference accepts interval notation under every policy
    for policy in ("required", "union", "either"):
        assert ok(union[1], union[0], interval_form=policy) and ok(single[1], single[0], interval_form=policy)
    # set-builder notation is set notation, not an inequality answer
    assert ok(r"\{x \mid x < -3 \text{ or } x > 3\}", union[1], interval_form="required")


def test_inequalities_name_one_variable():
    assert not ok("y > 2", "x > 2") and not ok(r"y \le 1 \text{ or } y > 3", r"x \le 1 \text{ or } x > 3")
    assert ok(r"t \le 1 \text{ or } t > 3", r"t \le 1 \text{ or } t > 3") and ok("2 < y", "y > 2")
    assert not ok(r"y \in [1, 2]", r"x \in [1, 2]") and ok(r"x \in [1, 2]", r"[1, 2]")
    # x \in {1, 2} stays a list of answers
    assert ok("1, 2", r"x \in \{1, 2\}") and ok(r"x = 1, 2", r"x \in \{1, 2\}") and not ok("1, 3", r"x \in \{1, 2\}")


# ---------------------------------------------------------------- vectors and named answers


@cases(
    (r"\langle 3, -1, 2\rangle", r"\begin{pmatrix} 3 \\ -1 \\ 2 \end{pmatrix}", True), (r"\langle 3, -1, 2\rangle", "(3,-1,2)", True),
    (r"\left\langle \frac12, 0 \right\rangle", r"\langle 0.5, 0\rangle", True), ("⟨1, 2⟩", "(1, 2)", True),
    (r"\langle 3, 1, 2\rangle", "(3,-1,2)", False), (r"\langle 1, 2\rangle", "(1, 2, 0)", False),
)
def test_angle_bracket_vectors(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    (r"\cos\alpha = -\frac{4}{5}", r"-\frac45", True), (r"\tan x = 2", "2", True), (r"\sin\theta = \frac35", "0.6", True),
    (r"f(x) = x^2 - 4x + 3", "x^2-4x+3", True), ("g(t)=3t-1", "3t-1", True), ("y = -2x + 5", "-2x+5", True),
    (r"P(A) = \frac{1}{6}", r"\frac16", True), (r"\sin\theta = \frac35", r"\frac45", False), ("y = -2x + 5", "-2x+4", False),
    (r"\sin x = \frac12", r"\cos x = \frac12", False), (r"\sin 2x = \frac12", r"\frac12", False),
    (r"2\cos\alpha = 1", r"1", False),
)
def test_named_answers(pred, gold, expected):
    assert ok(pred, gold) is expected


# ---------------------------------------------------------------- lists


@cases(
    ("The roots are -1, 4.", "4, -1", True), ("The solutions are $x=5$ and $x=-2$.", "-2, 5", True),
    ("In increasing order, the values are 2, 7, 9.", "9, 7, 2", True), (r"x = 3 \text{ or } x = -1", "-1, 3", True),
    ("x = 3, -1", "-1, 3", True), (r"The zeros are $\boxed{3, -1}$.", "-1, 3", True),
    ("The coefficients are 2, 7, 9.", "9, 7, 2", False), ("2, 7, 9", "9, 7, 2", False),
    ("The roots are -1, 5.", "4, -1", False), ("The roots are -1, 4, 4.", "4, -1, 2", False),
    (r"a = 3, b = -1", "-1, 3", False), (r"\boxed{3} or \boxed{2}", "2, 3", True), (r"\boxed{3} and \boxed{2}", "2, 3", False),
)
def test_list_order_from_the_completions_words(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_completion_words_do_not_override_explicit_policies():
    assert not ok("The roots are -1, 4.", "4, -1", list_order="ordered")
    assert ok("-1, 4", "4, -1", list_order="unordered")


# ---------------------------------------------------------------- units and ratios


@cases(
    ("10cm", "10", True), ("5kg", "5", True), ("12km", "12", True), ("3ft", "3", True), ("60km/h", "60", True),
    (r"25cm^2", "25", True), ("10cm", "11", False), ("2m", "2", False), ("3x", "3", False), ("10cm", "10cm", True),
)
def test_units_glued_to_numbers(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_units_strict_compares_unit_words():
    assert ok(r"10 \text{ cm}", r"10 \text{ cm}", units="strict")
    assert not ok(r"10 \text{ cm}", "10", units="strict")
    assert not ok("10 km", r"10 \text{ cm}", units="strict")
    assert ok("10 km", r"10 \text{ cm}")  # strip (default)


@cases(
    ("4:6:8", "2:3:4", True), ("2:3:4", "4:6:8", True), (r"1:\frac12:2", "2:1:4", True), ("2:4:6:8", "1:2:3:4", True),
    ("0:2:4", "0:1:2", True), ("0.5:1:1.5", "1:2:3", True),
    ("3:2:4", "2:3:4", False), ("-2:-4:-6", "1:2:3", False), ("2:4", "1:2:3", False), ("0:0:0", "0:0:0", True),
    ("0:2:4", "1:2:3", False), ("20:60:00", "10:30:00", False), ("10:30:00", "10:30:00", True),
)
def test_ratios_of_three_or_more_terms(pred, gold, expected):
    assert ok(pred, gold) is expected


# ---------------------------------------------------------------- extraction


@cases(
    ("We solve 3x + 2 = 14, so x = 4.\nCheck: 3(4) + 2 = 14. ✓", "4", True),
    ("The value is x = 4. Verify: 3*4+2 = 14", "4", True), ("So n = 6. Let's verify: 6*7/2 = 21.", "6", True),
    ("x = 3. Check: 2(3)+1 = 7, not 9. So x = 4.", "4", True),
    ("We get 21 in total. Let me check: 6*7/2 = 21.", "21", True),
    ("We have 3 cases. Let me check each: they give 4 and 8, so 12 in all.", "12", True),
    ("x = 4 Check: 2(4)+1 = 9", "4", True), ("x = 4.\nSubstituting x = 4 into the equation: 2(4)+1 = 9.", "4", True),
    ("x = 4. Check: 2(4)+1 = 9", "9", False), ("So n = 6. Let's verify: 6*7/2 = 21.", "21", False),
    # a check followed by a change of mind is not a check of the final answer
    ("x = 3. Check: 2(3)+1 = 7. Hmm, that is wrong; x = 4.", "4", True),
    ("x = 3. Check: 2(3)+1 = 7. Hmm, that is wrong; x = 4.", "3", False),
)
def test_verification_after_the_answer(pred, gold, expected):
    assert ok(pred, gold) is expected


GSM_REF = "He buys 3 packs of 12 eggs: 3*12 = <<3*12=36>>36 eggs.\nHe uses 8, so 36-8 = <<36-8=28>>28 are left.\n#### 28"


@cases(
    (r"\boxed{28}", GSM_REF, True), ("He has 28 eggs left.", GSM_REF, True), (r"\boxed{36}", GSM_REF, False),
    (r"\boxed{1200}", "Total: <<3*400=1200>>1200\n#### 1,200", True),
    ("So 36 - 8 = 28 eggs.\n#### 28", "28", True), ("So 36 - 8 = 28 eggs.\n#### 28", "36", False),
    ("#### Step 1\nWe compute 2+2 = 4.", "4", True), ("#### 5\nThe answer is 4.", "4", True),
)
def test_gsm8k_answer_fields(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    # "or"/"and" glued between a value and the next assignment
    ("x=1orx=-1", r"x = \pm 1", True), ("W(x)=1orW(x)=-1", r"W(n) = 1 \text{ and } W(n) = -1", True),
    ("a=2andb=3", "a = 2, b = 3", True), ("x=1orx=2", r"x = \pm 1", False), ("a=2andb=4", "a = 2, b = 3", False),
    ("x<-2orx>2", r"(-\infty,-2)\cup(2,\infty)", True), (r"x\le-2orx\ge2", r"|x| \ge 2", True),
    ("x<-2orx>3", r"(-\infty,-2)\cup(2,\infty)", False),
    # a reference whose box never closes (double-escaped data fields): its content to the end
    ("W(x)=1orW(x)=-1", r"\\boxed{W(n) = 1 \\text{ and } W(n) = -1", True), (r"x = 3", r"\boxed{3", True),
    ("W(x)=1orW(x)=-3", r"\\boxed{W(n) = 1 \\text{ and } W(n) = -1", False), ("4", r"\boxed{3", False),
)
def test_glued_connectives_and_unclosed_reference_boxes(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_unclosed_box_in_a_completion_is_not_an_answer():
    # a cut-off completion's unclosed box is not its answer (only a reference's is read to the end)
    assert extract(r"so the answer is \boxed{3").how != "unclosed box"
    assert extract(r"\boxed{2} and then \boxed{3", is_reference=True).answer == "3"
    assert extract(r"\boxed{2} and \boxed{3}", is_reference=True).answer == "3"


# ---------------------------------------------------------------- rounded references (opt-in)


@cases(
    (r"\pi", "3.14", True), (r"4\pi", "12.57", True), ("1/3", "0.3333", True), (r"\sqrt2", "1.414", True),
    (r"\frac{2}{3}", "0.667", True), (r"e^2", "7.389", True),
    (r"\sqrt2", "1.42", False), (r"\pi", "3.1", False), ("3", "3.14", False), ("3.1416", "3.14", False),
    (r"\frac{314}{100}", "3.14", True), (r"\frac{3141}{1000}", "3.14", False), (r"\sqrt2", "1.415", False),
    (r"\pi", "3.14\\%", False),
)
def test_rounded_reference_precision_policy(pred, gold, expected):
    assert ok(pred, gold, rounded_reference="precision") is expected


def test_rounded_reference_is_off_by_default():
    assert not ok(r"\pi", "3.14")
    assert not ok("1/3", "0.3333")
    assert ok(r"\pi", "3.14159265358979")  # rel_tol applies as before


# ---------------------------------------------------------------- nesting guard


def test_nesting_guard_at_sixty_levels():
    for depth in (20, 60):
        assert ok("(" * depth + "7" + ")" * depth, "7")
        assert ok(r"\frac{" * depth + "1" + "}{2}" * depth, rf"\frac{{1}}{{2^{{{depth}}}}}")
        assert ok("-(" * (depth // 2) + "3" + ")" * (depth // 2), "3")  # a sign is a level too
    for s in ("(" * 61 + "7" + ")" * 61, "-" * 61 + "7", r"\sqrt{" * 61 + "2" + "}" * 61):
        assert check(s, "7", {})["status"] == "too_large"


# ---------------------------------------------------------------- hostile inputs

N = 100_000
HOSTILE = {
    "thin-space groups": "1\\," + "234\\," * (N // 5),
    "space groups in prose": "The total is " + "123 " * (N // 4),
    "number words": "twenty " * (N // 7), "hyphenated number words": "twenty-one " * (N // 11),
    "verification markers": "x = 4. Check: " * (N // 14), "check words": "check 1 " * (N // 8),
    "solution phrases": "the roots are " * (N // 14), "order phrases": "in increasing order: " * (N // 21),
    "gsm8k markers": "#### " * (N // 5), "gsm8k tail": "#### " + "1" * N, "gsm8k lines": "#### 1\n" * (N // 7),
    "set-builder nesting": "\\{x \\mid " * 3000 + "x>1" + "\\}" * 3000,
    "set differences": "\\mathbb{R}\\setminus" * (N // 20) + "\\{0\\}",
    "complements": "[1,2]^c \\cup " * 200 + "[3,4]", "or-joined inequalities": " or ".join(["x>1"] * 300),
    "lor-joined inequalities": " \\lor ".join(f"x>{i}" for i in range(150)),
    "math blocks joined by or": "So we get " + " or ".join(["$x>1$"] * (N // 10)),
    "glued connectives": "1or" * (N // 3), "glued assignments": "x=1orx=" * (N // 7) + "1",
    "unclosed reference box": "\\boxed{" + "x" * N,
    "or-joined conditions with points": " or ".join(["x>1", "x=0"] * 150),
    "letter unions": "(0,1) U " * (N // 8) + "(2,3)", "interval lists": ", ".join(["(-\\infty,1)"] * 300),
    "hspace groups": "x<1 \\hspace{" * 3000 + "}" * 3000, "comma conditions": ", ".join(f"x \\ne {i}" for i in range(300)),
    "spaces between math blocks": "We find $x>1$" + " " * N + ", $x<0$ and so on.",
    "ratio terms": ":".join(["1"] * 600), "angle brackets": "\\langle " * (N // 8),
    "glued units": "10cm " * (N // 5), "unclosed display math": "\\[" * (N // 2), "unclosed inline math": "\\(" * (N // 2),
    "unclosed boxes": "\\boxed{" * (N // 7), "dunder": "_" * N, "newlines": "x" + "\n" * N,
    # SymPy cannot solve these quickly: they are left unsolved, not timed out
    "set-builder of degree 100": r"\{x \mid x^{100} - 3x + 1 > 0\}",
    "inequality of degree 100 or more": r"x^{100} - 3x + 1 > 0 \text{ or } x^{99} < 2",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_each_new_rules_worst_input_is_fast_in_process(name):
    # in-process, without the worker's timers: the rules themselves are linear, not merely killed
    text = HOSTILE[name]
    for pred, gold in ((text, "-987654"), ("-987654", text), (text, "(0, 1)")):
        t = time.perf_counter()
        r = check(pred, gold, {})
        assert time.perf_counter() - t < 2.0, name
        assert r["reward"] == 0.0 and r["status"] != "timeout"


MARK = "/tmp/verireward_math_round2_marker"


@pytest.fixture(scope="module")
async def grader():
    g = MathGrader(workers=2)
    await g.start()
    yield g
    await g.close()


async def test_hostile_inputs_through_the_pool(grader):
    payloads = list(HOSTILE.values()) + [
        rf"\{{x \mid __import__('os').system('touch {MARK}') \}}", rf"\langle exec('open(\"{MARK}\",\"w\")'), 1\rangle",
        rf"#### __import__('os').system('touch {MARK}')", rf"twenty-one; open('{MARK}', 'w')",
    ]
    for p in payloads:
        t = time.perf_counter()
        g = await grader.grade(p, "-987654")
        assert time.perf_counter() - t < 2.0
        assert g.reward == 0.0 and g.status != "timeout"
    assert not os.path.exists(MARK)


@cases(
    (r"\num{4096}", "4096", True), (r"\SI{10}{cm}", "10", True), (r"\qty{2.5}{\kilo\gram}", "2.5", True),
    (r"\text{all real numbers}", r"(-\infty,\infty)", True), (r"\left\{ x \middle| x > 2 \right\}", r"(2,\infty)", True),
    (r"\text{Area} = 12", "12", True), ("x = 4. Substituting back: 2(4)+1 = 9.", "4", True),
    (r"\num{4096}", "4069", False), (r"\text{real}", r"\mathbb{R}", False), (r"\text{all real numbers}", r"(0,\infty)", False),
    (r"\text{Area} = 12", "13", False),
)
def test_more_notations(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    ("Let me compute 5*6. Check: 5*6 = 30.", "30", True), ("So she has 12 apples. Check: 5+7 = 12.", "12", True),
    ("The values of a and b are 3 and 4, so a+b = 7.", "7", True), ("x = 3 and x = -1", "-1, 3", True),
    ("Let me compute 5*6. Check: 5*6 = 30.", "6", False),
    # distinct names or "the values are" keep a reference's order
    ("The values of a and b are 5 and 3.", "3, 5", False), ("a = 5 and b = 3", "3, 5", False),
)
def test_new_rules_do_not_overreach(pred, gold, expected):
    assert ok(pred, gold) is expected


@cases(
    ("x_1 = 2, x_2 = 3", "3, 2", True), (r"P(\text{red}) = \frac{3}{8}", r"\frac38", True),
    ("a_1 = 2, b_1 = 3", "3, 2", False), (r"P(\text{red}) = \frac{3}{8}", r"\frac58", False),
)
def test_indexed_unknowns_and_word_arguments(pred, gold, expected):
    assert ok(pred, gold) is expected


def test_verdict_prints_numbers_beyond_pythons_str_limit():
    # 10^5000 is within MAX_DIGITS but over Python's 4300-digit str() limit
    r = check("10^{5000}", "x", {})
    assert r["status"] == "ok" and r["reward"] == 0.0 and r["parsed_pred"] == "<a number too long to print>"
    assert ok("12^{4096}", "12^4096") and not ok("2^{9000}+1", "2^{9000}")


@cases(
    ("10.0 cm", "10cm", True), (r"10\text{ cm}", "10cm", True), ("12 kg", "12kg", True),
    ("10", "10cm", False), (r"\boxed{10}", "10cm", False), ("11 cm", "10cm", False),
)
def test_a_references_glued_unit_needs_a_unit_in_the_answer(pred, gold, expected):
    # MARIO's reading: a bare 10 does not match the reference 10cm; an answer with a unit does
    assert ok(pred, gold) is expected


def test_glued_reference_units_under_units_strict():
    assert ok("10.0 cm", "10cm", units="strict")
    assert not ok("10.0 km", "10cm", units="strict")
