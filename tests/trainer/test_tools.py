"""Multi-turn tool rollouts (tools=python): tool tokens are out of the loss, code runs in a real
session on a live reward server, and every session a rollout opens is released on success and
when generation or scoring raises.

The policy here is the tiny random model, scripted through a logits processor (it forces the
next token of a fixed text per prompt): generation, the stop at a closed ```python block, the
sessions over HTTP, the tool turns and the loss are all the real code paths; only what the
policy chooses to write is fixed, so the tests know what to expect.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest

from tests.conftest import kind_params
from trainer.tools import SessionClient

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


# ----------------------------------------------------------------------------- a scripted policy


class Script:
    """A ``LogitsProcessor`` that makes the policy write ``scripts[key][turn]`` (``key`` from
    ``task <key>`` in the prompt; turn = ```output blocks seen so far), then EOS. The tiny
    tokenizer is one token per character, so text offsets are token offsets. Variant ``v`` of a
    key is picked by row parity on the first token and read back from the text after that."""

    def __init__(self, tokenizer, scripts: dict[str, list[list[str]]], fail_on_turn: int | None = None):
        self.tok, self.scripts, self.fail_on_turn = tokenizer, scripts, fail_on_turn

    def __call__(self, input_ids, scores):
        out = torch.full_like(scores, float("-inf"))
        for i in range(input_ids.shape[0]):
            text = self.tok.decode(input_ids[i])
            key = re.search(r"task (\w+)", text).group(1)
            body = text.split("<|im_start|>assistant\n", 1)[1]
            variants = self.scripts[key]
            v = i % len(variants) if not body else next(
                (j for j, s in enumerate(variants) if body.startswith(s[0][:1])), 0)
            turn = body.count("```output")
            if self.fail_on_turn is not None and turn >= self.fail_on_turn:
                raise RuntimeError("generation failed on purpose")
            this = body.rsplit("```output", 1)[1].split("```\n", 1)[1] if turn else body
            want = variants[v][turn] if turn < len(variants[v]) else ""
            t = self.tok.convert_tokens_to_ids(want[len(this)]) if len(this) < len(want) else self.tok.eos_token_id
            out[i, t] = 0.0
        return out


def _processors(script: Script):
    from transformers import LogitsProcessorList

    return LogitsProcessorList([script])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.trainer.tiny import save_tiny

    d = save_tiny(tmp_path_factory.mktemp("tiny-tools"))
    return d, AutoTokenizer.from_pretrained(d), AutoModelForCausalLM.from_pretrained(d)


# ----------------------------------------------------------------------------- masking, no server


def _tool_seq(tok, prompt: str, parts: list[tuple[str, int]]):
    """A Sequence whose completion is ``parts`` of (text, 1 = policy / 0 = tool)."""
    from trainer.rollout import Sequence

    ids: list[int] = []
    mask: list[float] = []
    for text, m in parts:
        t = tok(text, add_special_tokens=False)["input_ids"]
        ids += t
        mask += [float(m)] * len(t)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    return Sequence(prompt_ids=torch.tensor(p), completion_ids=torch.tensor(ids), text="", truncated=False,
                    prompt_index=0, loss_mask=torch.tensor(mask))


def _loss(model, seqs, advantages, ref_shift: float = 0.0, capture: dict | None = None, fixed_old: bool = False):
    """The trainer's loss path (collate -> token_logprobs -> grpo_loss) on ``seqs``; the old and
    reference log-probs near the current ones, or (``fixed_old``) fixed values that do not
    depend on the tokens, so the loss does."""
    from trainer.loss import grpo_loss
    from trainer.rollout import collate, token_logprobs

    b = collate(seqs, 0, torch.device("cpu"))
    hook = None
    if capture is not None:
        def keep(_m, _i, out):
            out.retain_grad()
            capture["logits"] = out
        hook = model.lm_head.register_forward_hook(keep)
    try:
        logp = token_logprobs(model, b, 1.0)
    finally:
        if hook is not None:
            hook.remove()
    gen = torch.Generator().manual_seed(0)
    base = torch.full_like(logp, -4.0) if fixed_old else logp.detach()
    old = (base + 0.05 * torch.randn(logp.shape, generator=gen)) * b.completion_mask
    ref = (base + ref_shift * torch.randn(logp.shape, generator=gen)) * b.completion_mask
    out = grpo_loss(logp, old, torch.tensor(advantages), b.completion_mask, ref_logp=ref, kl_coeff=0.1,
                    loss_type="dapo")
    return out, b


def test_tool_tokens_get_no_gradient(tiny):
    """A real forward/backward of the tiny model: the logits that predict tool tokens get exactly
    zero gradient (no surrogate, ratio or KL term), the ones that predict policy tokens do not."""
    _, tok, model = tiny
    s1 = _tool_seq(tok, "<|im_start|>user\ntask a<|im_end|>\n<|im_start|>assistant\n",
                   [("```python\nprint(6*7)\n```", 1), ("\n```output\n42\n```\n", 0), ("so 42", 1)])
    s2 = _tool_seq(tok, "<|im_start|>user\ntask b<|im_end|>\n<|im_start|>assistant\n",
                   [("```python\n1\n```", 1), ("\n```output\n1\n```\n", 0)])
    model.zero_grad()
    cap: dict = {}
    out, b = _loss(model, [s1, s2], [1.0, -1.0], ref_shift=0.3, capture=cap)
    out.loss.backward()
    grad = cap["logits"].grad  # [B, T+1, V]: position j predicts completion token j
    T = b.completion_mask.shape[1]
    per_pos = grad[:, :T].abs().sum(-1)
    tool = b.completion_mask == 0
    assert int(tool.sum()) > 0
    assert float(per_pos[tool].max()) == 0.0
    policy = b.completion_mask == 1
    assert bool((per_pos[policy] > 0).all())
    assert out.num_tokens == int(s1.loss_mask.sum() + s2.loss_mask.sum())


def test_loss_unchanged_when_tool_tokens_change(tiny):
    """A trajectory cut off inside a tool turn: whatever the tool's tokens are, the loss and the
    gradient are the same (they are input the policy did not write, and nothing follows them)."""
    _, tok, model = tiny
    prompt = "<|im_start|>user\ntask c<|im_end|>\n<|im_start|>assistant\n"
    a = _tool_seq(tok, prompt, [("```python\nprint(2**10)\n```", 1), ("\n```output\n1024\n", 0)])
    b = _tool_seq(tok, prompt, [("```python\nprint(2**10)\n```", 1), ("\n```output\n9999\n", 0)])
    assert not torch.equal(a.completion_ids, b.completion_ids)
    grads = []
    losses = []
    for s in (a, b):
        model.zero_grad()
        out, _ = _loss(model, [s], [1.0], ref_shift=0.3, fixed_old=True)
        out.loss.backward()
        losses.append(float(out.loss.detach()))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert losses[0] == pytest.approx(losses[1], abs=1e-7)
    assert torch.allclose(grads[0], grads[1], atol=1e-7)
    # and without the mask the tool's tokens would count: the loss differs
    a.loss_mask = b.loss_mask = None
    la, _ = _loss(model, [a], [1.0], ref_shift=0.3, fixed_old=True)
    lb, _ = _loss(model, [b], [1.0], ref_shift=0.3, fixed_old=True)
    assert float(la.loss.detach()) != pytest.approx(float(lb.loss.detach()), abs=1e-6)


def test_tool_turn_text():
    from trainer.multiturn import first_code_block, tool_turn
    from trainer.tools import ExecResult

    assert first_code_block("x\n```python\na = 1\n```\n```python\nb\n```") == "a = 1\n"
    assert first_code_block("```python\nnot closed") is None
    assert tool_turn(ExecResult(status="ok", stdout="7\n", result="8")) == "\n```output\n7\n8\n```\n"
    err = ExecResult(status="error", error={"type": "NameError", "message": "name 'x' is not defined"})
    assert "NameError: name 'x' is not defined" in tool_turn(err)
    long = tool_turn(ExecResult(status="ok", stdout="9" * 5000))
    assert len(long) < 500 and "[output truncated]" in long


def test_config_tools():
    from trainer.config import ConfigError, load_config

    cfg = load_config(None, {"tools": "python", "max_tool_turns": 3})
    assert cfg.tools == "python" and cfg.max_tool_turns == 3
    assert load_config(None, {}).tools == "none"
    with pytest.raises(ConfigError, match="tools"):
        load_config(None, {"tools": "bash"})
    with pytest.raises(ConfigError, match="generation_backend=generate"):
        load_config(None, {"tools": "python", "generation_backend": "vllm"})


# ----------------------------------------------------------------------------- a live server


@pytest.fixture(scope="module", params=kind_params())
def server_url(request, shared_servers):
    return shared_servers.get(sandbox=request.param).url


class RecordingClient(SessionClient):
    """The real SessionClient, also remembering the ids it opened (to check each one is gone)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.opened: list[str] = []

    def create(self, *a, **kw) -> str:
        sid = super().create(*a, **kw)
        self.opened.append(sid)
        return sid


def _gone(url: str, ids: list[str]) -> bool:
    import httpx

    with httpx.Client(base_url=url, timeout=30) as h:
        for sid in ids:
            r = h.post(f"/v1/sessions/{sid}/execute", json={"code": "1"})
            if r.status_code == 200 and r.json()["status"] != "session_lost":
                return False
    return True


def test_session_of_a_gone_server_is_lost(server_url):
    """An id another server gave (its server restarted, or its replica replaced) answers 503 to
    retry; once the retries run out, the tool call is `session_lost` and the rollout goes on."""
    c = SessionClient(server_url, retries=1)
    try:
        assert c.execute("gone." + "0" * 32, "1").status == "session_lost"
    finally:
        c.close()


SCRIPTS = {
    # state persists between turns: x from the first block is read by the second
    "p": [["```python\nx = 6 * 7\nprint(x)\n```", "```python\nprint(x + 1)\n```", "so \\boxed{42}"]],
    "q": [["\\boxed{5}"]],  # no tool call at all
}


def _rollouts(tiny, client, max_tool_turns=2):
    from trainer.multiturn import ToolRollouts

    _, tok, model = tiny
    return ToolRollouts(model, tok, client, max_new_tokens=160, top_p=1.0, max_prompt_length=256,
                        max_tool_turns=max_tool_turns, tool_timeout_s=10.0, autocast_fn=lambda: None)


def test_rollout_runs_code_in_sessions_and_releases_them(tiny, server_url):
    from trainer.rollout import render_prompts

    _, tok, _ = tiny
    client = RecordingClient(server_url)
    ro = _rollouts(tiny, client)
    ro.logits_processor = _processors(Script(tok, SCRIPTS))
    label = {"grpo_run": "test-success", "grpo_step": "0"}
    try:
        seqs = ro.generate(render_prompts(tok, ["task p", "task q"]), 2, 1.0, label)
        left = client.list_ids("grpo_run=test-success")
    finally:
        client.close()
    assert len(client.opened) == 4 and left == []
    assert _gone(server_url, client.opened)
    p, q = seqs[0], seqs[2]
    assert "```output\n42\n```" in p.text and "```output\n43\n```" in p.text, p.text
    assert p.text.endswith("so \\boxed{42}") and not p.truncated
    assert p.extra == {"tool_calls": 2, "tool_errors": 0}
    assert q.extra == {"tool_calls": 0, "tool_errors": 0} and q.loss_mask.min() == 1
    # the masked-out tokens are exactly the two tool turns
    tool_text = tok.decode(p.completion_ids[p.loss_mask == 0])
    assert tool_text == "\n```output\n42\n```\n\n```output\n43\n```\n"
    assert tok.decode(p.completion_ids[p.loss_mask == 1]).startswith("```python\nx = 6 * 7")


def test_max_tool_turns_caps_the_calls(tiny, server_url):
    from trainer.rollout import render_prompts

    _, tok, _ = tiny
    client = RecordingClient(server_url)
    ro = _rollouts(tiny, client, max_tool_turns=1)
    # past the cap the second block is just text: the script's second turn never comes
    ro.logits_processor = _processors(Script(tok, {"p": [["```python\nprint(1)\n```", "more ```python\nprint(2)\n```"]]}))
    try:
        seqs = ro.generate(render_prompts(tok, ["task p"]), 2, 1.0, {"grpo_run": "test-cap"})
    finally:
        client.close()
    assert [s.extra["tool_calls"] for s in seqs] == [1, 1]
    assert seqs[0].text.count("```output") == 1 and seqs[0].text.endswith("print(2)\n```")


def test_sessions_released_when_generation_raises(tiny, server_url):
    from trainer.rollout import render_prompts

    _, tok, _ = tiny
    client = RecordingClient(server_url)
    ro = _rollouts(tiny, client)
    ro.logits_processor = _processors(Script(tok, SCRIPTS, fail_on_turn=1))
    try:
        with pytest.raises(RuntimeError, match="on purpose"):
            ro.generate(render_prompts(tok, ["task p", "task q"]), 2, 1.0, {"grpo_run": "test-raise"})
        left = client.list_ids("grpo_run=test-raise")
    finally:
        client.close()
    assert len(client.opened) == 4 and left == []
    assert _gone(server_url, client.opened)


def _tool_trainer(tiny, tmp_path, server_url, scorer):
    from trainer.config import TrainConfig
    from trainer.trainer import GRPOTrainer

    d, tok, _ = tiny
    tasks = tmp_path / "tasks.jsonl"
    with open(tasks, "w") as f:
        for k in ("p", "r"):
            f.write(json.dumps({"prompt": f"task {k}", "task": {"type": "math", "answer": "42"}}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = TrainConfig(model=str(d), state_dir=str(tmp_path / "state"), tasks=str(tasks), num_eval_tasks=0,
                          max_steps=1, prompts_per_step=2, group_size=2, max_completion_length=120,
                          learning_rate=1e-3, progress_bar=False, device="cpu", baseline_eval=False, eval_every=0,
                          save_every=0, export_final=False, kl_coeff=0.0, tools="python", reward_url=[server_url],
                          system_prompt="")
    tr = GRPOTrainer(cfg, scorer=scorer)
    tr.tools.client = RecordingClient(server_url)
    # each prompt: one row computes with the tool and boxes 42, the other guesses 5 (the group has variance)
    scripts = {k: [["```python\nprint(6 * 7)\n```", "\\boxed{42}"], ["\\boxed{5}"]] for k in ("p", "r")}
    tr.tools.logits_processor = _processors(Script(tr.tokenizer, scripts))
    return tr


def test_train_step_with_tools(tiny, tmp_path, server_url):
    """One GRPO step through the real server: /v1/score grades the transcripts, the tool rows win,
    the loss counts only the policy's tokens, the step reports the tool-call rate, and no session
    of the run is left."""
    tr = _tool_trainer(tiny, tmp_path, server_url, scorer=None)
    try:
        seen: list = []
        orig = tr._update
        tr._update = lambda seqs, n, t: (seen.extend(seqs), orig(seqs, n, t))[1]
        rec = tr.train_step()
        left = tr.tools.client.list_ids(f"grpo_run={tr.run_id}")
        opened = list(tr.tools.client.opened)
    finally:
        tr.close()
    assert rec["tool_call_rate"] == 0.5 and rec["tool_calls_mean"] == 0.5 and rec["tool_error_share"] == 0.0
    assert rec["reward/verifier"] == 0.5 and rec["kept_groups"] == 2
    assert len(seen) == 4
    tool_rows = [s for s in seen if s.extra["tool_calls"]]
    assert all(s.reward == 1.0 and s.advantage > 0 for s in tool_rows)
    assert rec["tokens_per_s"] > 0
    mt = json.loads((tmp_path / "state" / "metrics.jsonl").read_text().splitlines()[-1])
    assert mt["tool_call_rate"] == 0.5
    assert len(opened) == 4 and left == [] and _gone(server_url, opened)


def test_sessions_released_when_scoring_raises(tiny, tmp_path, server_url):
    from trainer.rewards import CallableScorer

    def broken(items):
        raise RuntimeError("scorer down on purpose")

    sc = CallableScorer(broken)
    tr = _tool_trainer(tiny, tmp_path, server_url, scorer=sc)
    try:
        with pytest.raises(RuntimeError, match="on purpose"):
            tr.train_step()
        left = tr.tools.client.list_ids(f"grpo_run={tr.run_id}")
        opened = list(tr.tools.client.opened)
    finally:
        tr.close()
        sc.close()
    assert len(opened) == 4 and left == [] and _gone(server_url, opened)


def test_bigarith_tasks():
    from trainer.tasks import bigarith_tasks, build_split

    items = bigarith_tasks(40, 3)
    assert [t.prompt for t in items] == [t.prompt for t in bigarith_tasks(40, 3)]
    assert len({t.prompt for t in items}) == 40
    for t in items:
        assert t.task["type"] == "math"
        m = re.match(r"Compute (\d+) \* (\d+) exactly\. Use Python", t.prompt)
        if m:
            assert int(t.task["answer"]) == int(m.group(1)) * int(m.group(2))
        else:
            b, e, mod = map(int, re.match(r"Compute (\d+)\^(\d+) mod (\d+)\.", t.prompt).groups())
            assert int(t.task["answer"]) == pow(b, e, mod)
    train, held = build_split("bigarith", 30, 8, 1)
    assert len(train) == 30 and len(held) == 8 and not {t.prompt for t in train} & {t.prompt for t in held}
