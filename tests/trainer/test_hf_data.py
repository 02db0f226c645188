"""Tasks from HF datasets on local files: column mapping, JSONL/Parquet/Arrow, streaming with an
exact resume position, and a real step on a dataset's tasks."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")

from tests.trainer.tiny import digit_reward  # noqa: E402
from trainer.config import ConfigError, load_config  # noqa: E402
from trainer.hf_data import DatasetConfig, StreamingTaskStream, load_split, streaming_eval  # noqa: E402
from trainer.rewards import CallableScorer  # noqa: E402
from trainer.trainer import GRPOTrainer  # noqa: E402

ROWS = [{"qid": f"q{i}", "question": f"What is {i} + {i}?", "solution": 2 * i} for i in range(12)]
MAP = {"id_column": "qid", "prompt_template": "{question}\nAnswer in \\boxed{{}}.",
       "task_fields": {"answer": "solution"}, "task_defaults": {"type": "math"}}


def _jsonl(tmp_path, rows=ROWS):
    p = tmp_path / "tasks.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_column_mapping_from_jsonl(tmp_path):
    dc = DatasetConfig(path=str(_jsonl(tmp_path)), **MAP)
    train, held = load_split(dc, num_train=8, num_eval=3, seed=1)
    assert len(train) == 8 and len(held) == 3 and not {t.id for t in train} & {t.id for t in held}
    by = {t.id: t for t in train + held}
    assert by["q5"].prompt == "What is 5 + 5?\nAnswer in \\boxed{}."
    assert by["q5"].task == {"type": "math", "answer": "10"}  # the server's schema; answer as a string


@pytest.mark.parametrize("fmt", ["parquet", "arrow-file", "saved-dir"])
def test_parquet_and_arrow_give_the_same_tasks(tmp_path, fmt):
    ds = datasets.Dataset.from_list(ROWS)
    if fmt == "parquet":
        path = tmp_path / "t.parquet"
        ds.to_parquet(str(path))
    else:
        ds.save_to_disk(str(tmp_path / "saved"))
        path = tmp_path / "saved" if fmt == "saved-dir" else next((tmp_path / "saved").glob("*.arrow"))
    got = load_split(DatasetConfig(path=str(path), **MAP), 8, 3, seed=1)
    want = load_split(DatasetConfig(path=str(_jsonl(tmp_path)), **MAP), 8, 3, seed=1)
    assert [(t.id, t.prompt, t.task) for t in got[0] + got[1]] == [(t.id, t.prompt, t.task) for t in want[0] + want[1]]


def test_a_task_column_in_the_server_schema(tmp_path):
    rows = [{"prompt": "Write f.", "task": {"type": "code", "language": "python",
                                            "tests": {"kind": "assert", "asserts": ["assert f() == 1"]}}}] * 3
    train, held = load_split(DatasetConfig(path=str(_jsonl(tmp_path, rows)), task_column="task"), 5, 1, seed=0)
    assert held[0].task["type"] == "code" and train[0].prompt == "Write f."


def test_bad_mapping_names_the_column(tmp_path):
    dc = DatasetConfig(path=str(_jsonl(tmp_path)), prompt_column="text", task_defaults={"type": "math"})
    with pytest.raises(ValueError, match="no column 'text'"):
        load_split(dc, 4, 1, seed=0)
    with pytest.raises(ValueError, match="task.type"):
        load_split(DatasetConfig(path=str(_jsonl(tmp_path)), prompt_column="question"), 4, 1, seed=0)
    with pytest.raises(ConfigError, match="dataset"):
        load_config(None, {"dataset": {"path": "x", "colums": {}}})


def test_streaming_epochs_and_exact_resume(tmp_path):
    dc = DatasetConfig(path=str(_jsonl(tmp_path)), streaming=True, shuffle_buffer=4, **MAP)
    held = streaming_eval(dc, 2)
    assert [t.id for t in held] == ["q0", "q1"]  # the first rows are held out
    s = StreamingTaskStream(dc, num_eval=2, seed=3)
    first = [t.id for t in s.take(25)]  # 10 training rows per epoch: two and a half epochs
    for e in range(2):
        assert sorted(first[e * 10 : (e + 1) * 10]) == sorted(f"q{i}" for i in range(2, 12))
    assert first[:10] != first[10:20]  # each epoch is shuffled afresh
    assert s.position == 25 and s.epoch == 2
    for pos in (7, 10, 23):  # resume mid-epoch, at a boundary, in a later epoch (a fresh process)
        r = StreamingTaskStream(dc, num_eval=2, seed=3)
        r.position = pos
        assert [t.id for t in r.take(25 - pos)] == first[pos:], pos


def test_a_step_on_dataset_tasks(tiny_cfg, tmp_path):
    for streaming in (False, True):
        cfg = tiny_cfg(dataset={"path": str(_jsonl(tmp_path)), "streaming": streaming, **MAP}, num_eval_tasks=2,
                       num_train_tasks=10, state_dir=str(tmp_path / f"s{streaming}"))
        tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
        assert len(tr.eval_items) == 2 and tr.eval_items[0].task["type"] == "math"
        rec = tr.train_step()
        assert rec["data_position"] == cfg.prompts_per_step and rec["groups"] == cfg.prompts_per_step
        tr.close()
