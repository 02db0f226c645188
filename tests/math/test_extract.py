from reward_server.grading.math.extract import extract, find_boxes
from reward_server.grading.math.grade import check


def test_last_box_with_nested_braces():
    t = r"first \boxed{1} then \boxed{\frac{3}{\sqrt{4}}} done"
    assert extract(t).answer == r"\frac{3}{\sqrt{4}}"
    assert [b[2] for b in find_boxes(r"\fbox{a{b}c}")] == ["a{b}c"]


def test_final_answer_phrases():
    assert extract("Work... The final answer is $17$. I hope it is correct.").answer == "17"
    assert extract("lots of text here\nAnswer: 3x+1").answer == "3x+1"
    assert extract("We get stuff. Final Answer: The total area is 56. Bye").answer == "56"


def test_fallback_last_number_and_none():
    text = "We add them and get 14 apples, then eat 3, leaving 11 apples in all"
    assert extract(text).answer == "11"
    assert extract(text, fallback="none").answer is None


def test_think_is_skipped():
    assert check(r"<think>maybe \boxed{5}</think> so \boxed{6}", "6", {})["reward"] == 1.0
    assert check(r"<think>maybe \boxed{5}</think> so \boxed{6}", "5", {})["reward"] == 0.0
    assert check(r"<think>never closed \boxed{5}", "5", {})["status"] == "no_answer"


def test_multiple_boxes():
    c = r"The roots are \boxed{2} and \boxed{-3}."
    assert check(c, "-3 and 2", {})["reward"] == 1.0  # the reference lists several answers
    assert check(c, "2, -3", {})["reward"] == 1.0
    # a plain comma list in the reference is ordered, unless the completion's own words make its list
    # a set of answers ("the roots are")
    assert check(c, "-3, 2", {})["reward"] == 1.0
    assert check(r"We get \boxed{2} and \boxed{-3}.", "-3, 2", {})["reward"] == 0.0
    assert check(c, "-3", {})["reward"] == 1.0  # otherwise the last box counts
    assert check(c, "2", {})["reward"] == 0.0


def test_math_delimiters():
    assert check(r"So the value is \(\frac{5}{7}\).", "5/7", {})["reward"] == 1.0
    assert check("Hence we conclude that $y = 12$ is the answer to this question.", "12", {})["reward"] == 1.0
