from trainer.tasks import TaskStream, arithmetic_tasks, build_split, code_tasks, load_jsonl, write_jsonl


def test_generators_are_seeded_and_well_formed():
    a1, a2 = arithmetic_tasks(50, 3), arithmetic_tasks(50, 3)
    assert [t.prompt for t in a1] == [t.prompt for t in a2]
    assert [t.prompt for t in arithmetic_tasks(50, 4)] != [t.prompt for t in a1]
    assert all(t.task["type"] == "math" and t.task["answer"].lstrip("-").isdigit() for t in a1)
    c = code_tasks(20, 0)
    assert len(c) == 20 and len({t.prompt for t in c}) == 20
    for t in c:
        assert t.task["tests"]["kind"] == "assert" and t.task["tests"]["asserts"]
        for a in t.task["tests"]["asserts"]:
            compile(a, "<assert>", "exec")


def test_code_task_asserts_hold_for_reference():
    # the asserts were computed from the reference implementation: check one family end to end
    t = next(t for t in code_tasks(60, 1) if "reverse" in t.prompt)
    ns = {"reverse": lambda s: s[::-1]}
    for a in t.task["tests"]["asserts"]:
        exec(a, ns)


def test_split_is_seeded_and_disjoint(tmp_path):
    tr, ev = build_split("mixed", 100, 20, seed=7)
    tr2, ev2 = build_split("mixed", 100, 20, seed=7)
    assert [t.prompt for t in ev] == [t.prompt for t in ev2] and len(ev) == 20 and len(tr) == 100
    assert not {t.prompt for t in tr} & {t.prompt for t in ev}
    assert {t.task["type"] for t in tr} == {"math", "code"}
    p = tmp_path / "t.jsonl"
    write_jsonl(tr[:10] + ev[:5], p)
    items = load_jsonl(p)
    assert len(items) == 15 and items[0].task == tr[0].task
    tr3, ev3 = build_split(str(p), 10, 5, seed=1)
    assert len(ev3) == 5 and len(tr3) == 10


def test_stream_position_is_the_whole_state():
    items = arithmetic_tasks(7, 0)
    s = TaskStream(items, seed=1)
    first = [t.id for t in s.take(17)]
    s2 = TaskStream(items, seed=1, position=10)
    assert [t.id for t in s2.take(7)] == first[10:]
    assert s.epoch == 2
    assert sorted(first[:7]) == sorted(t.id for t in items)  # an epoch is a permutation


def test_easy_arithmetic_is_opt_in_seeded_and_small():
    import re

    import pytest

    from trainer.config import TrainConfig

    assert TrainConfig().arith_difficulty == "standard"
    # the standard stream is unchanged by the option's existence
    assert [t.prompt for t in arithmetic_tasks(30, 5)] == [t.prompt for t in arithmetic_tasks(30, 5, "standard")]
    e1, e2 = arithmetic_tasks(200, 5, "easy"), arithmetic_tasks(200, 5, "easy")
    assert [t.prompt for t in e1] == [t.prompt for t in e2] and len({t.prompt for t in e1}) == 200
    for t in e1:
        a, b = (int(x) for x in re.findall(r"\d+", t.prompt.split("\n")[0]))
        assert int(t.task["answer"]) in (a + b, a - b) and 0 < int(t.task["answer"]) <= 20
    tr, ev = build_split("arithmetic", 100, 20, seed=7, arith_difficulty="easy")
    tr2, ev2 = build_split("arithmetic", 100, 20, seed=7, arith_difficulty="easy")
    assert [t.prompt for t in ev] == [t.prompt for t in ev2] and not {t.prompt for t in tr} & {t.prompt for t in ev}
    with pytest.raises(ValueError):
        arithmetic_tasks(5, 0, "hard")
