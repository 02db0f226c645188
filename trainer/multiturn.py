"""Multi-turn tool rollouts: the policy writes a ```python block, generation stops where the block
closes, the code runs in the trajectory's own session on the reward server, and its output comes
back as a tool turn (a ```output block) before generation goes on, up to ``max_tool_turns`` calls.

What the trainer learns from: every token of the completion is kept in order (policy tokens and
tool tokens, exactly the ids the policy was conditioned on, never re-tokenised), and
``Sequence.loss_mask`` is 1 on the policy's tokens and 0 on the tool's, so the tool's tokens have
no log-prob term in the loss, the ratios or the KL (``rollout.collate`` makes it the completion
mask). The reward is the ordinary one, on the whole transcript (see ``docs/TRAINER.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .rollout import Sequence, eos_ids
from .tools import ExecResult, SessionClient, open_sessions

# the system prompt a tools run uses unless the config names its own: the policy must know the fences
TOOL_SYSTEM_PROMPT = (
    "You can run Python. To run code, write it in a ```python block and end the block; the code runs in a "
    "persistent Python session and its output is shown to you in an ```output block. Then continue, and give "
    "the final answer as a number in \\boxed{}."
)
# a closed python block: what ends a policy turn (the first one in the turn's new text)
CODE_BLOCK = re.compile(r"```python[ \t]*\n(.*?)```", re.S)
TOOL_OUTPUT_CHARS = 400  # a tool turn shows at most this much of the code's output

RunCode = Callable[[int, str], ExecResult]  # (row, code) -> the session's answer


def first_code_block(text: str) -> str | None:
    """The code of the first closed ```python block in ``text``, else None."""
    m = CODE_BLOCK.search(text)
    return m.group(1) if m else None


def tool_turn(res: ExecResult, limit: int = TOOL_OUTPUT_CHARS) -> str:
    """The tool turn shown to the policy: stdout, the trailing expression's repr, the error's last
    line or the timeout, in one ```output block, cut to ``limit`` characters."""
    parts = [res.stdout]
    if res.result is not None:
        parts.append(res.result + "\n")
    if res.status == "error" and res.error is not None:
        parts.append(f"{res.error.type}: {res.error.message}\n")
    elif res.status == "timeout":
        parts.append("TimeoutError: the code ran past its time limit\n")
    elif res.status == "session_lost":
        parts.append("SessionLost: the interpreter was lost; its state is gone\n")
    body = "".join(parts)
    if len(body) > limit:
        body = body[:limit] + "\n...[output truncated]\n"
    if body and not body.endswith("\n"):
        body += "\n"
    return f"\n```output\n{body}```\n"


class _StopAtCodeBlock:
    """Per-row stopping criterion for ``model.generate``: a row stops once its new text holds a
    closed ```python block (where a tool call is still allowed) or it has used its token budget."""

    def __init__(self, tokenizer, start: int, tool_rows: torch.Tensor, budgets: torch.Tensor):
        self.tok, self.start, self.tool_rows, self.budgets = tokenizer, start, tool_rows, budgets

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        new = input_ids[:, self.start:]
        stop = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        n = new.shape[1]
        for i in range(input_ids.shape[0]):
            if n >= int(self.budgets[i]):
                stop[i] = True
            elif bool(self.tool_rows[i]) and CODE_BLOCK.search(self.tok.decode(new[i], skip_special_tokens=True)):
                stop[i] = True
        return stop


@dataclass
class _Row:
    prompt_ids: torch.Tensor
    prompt_index: int
    ids: list[int]
    mask: list[int]
    calls: int = 0
    errors: int = 0
    done: bool = False
    truncated: bool = False


def _block_end(tokenizer, new: list[int]) -> int | None:
    """Tokens of ``new`` up to and including the one that closes the first ```python block."""
    if not CODE_BLOCK.search(tokenizer.decode(new, skip_special_tokens=True)):
        return None
    for k in range(1, len(new) + 1):
        if CODE_BLOCK.search(tokenizer.decode(new[:k], skip_special_tokens=True)):
            return k
    return None


@torch.no_grad()
def generate_with_tools(
    model,
    tokenizer,
    prompt_texts: list[str],
    n_per_prompt: int,
    max_new_tokens: int,
    temperature: float,
    run_code: RunCode,
    max_tool_turns: int,
    top_p: float = 1.0,
    max_prompt_length: int = 1024,
    autocast=None,
    logits_processor=None,
) -> list[Sequence]:
    """Sample ``n_per_prompt`` trajectories per prompt, each at most ``max_new_tokens`` tokens of
    policy and tool text together. Row ``r`` (prompt ``r // n_per_prompt``) runs its code through
    ``run_code(r, code)``. A trajectory ends at EOS, at the budget (truncated), or, past
    ``max_tool_turns`` calls, wherever the policy ends it (a later block is then just text)."""
    from transformers import GenerationConfig, StoppingCriteriaList

    device = next(model.parameters()).device
    tokenizer.truncation_side = "left"
    enc = tokenizer(prompt_texts, truncation=True, max_length=max_prompt_length, add_special_tokens=False)
    rows = [_Row(torch.tensor(enc["input_ids"][j]), j, [], []) for j in range(len(prompt_texts))
            for _ in range(n_per_prompt)]
    eos = eos_ids(tokenizer, model)
    eos_set = set(eos)
    pad = tokenizer.pad_token_id
    greedy = temperature == 0
    was_training = model.training
    model.eval()
    try:
        while True:
            active = [i for i, r in enumerate(rows) if not r.done]
            if not active:
                break
            ctx = [torch.cat([rows[i].prompt_ids, torch.tensor(rows[i].ids, dtype=torch.long)]) for i in active]
            L = max(int(c.numel()) for c in ctx)
            ids = torch.full((len(active), L), pad, dtype=torch.long)
            attn = torch.zeros((len(active), L), dtype=torch.long)
            for k, c in enumerate(ctx):  # left padding: every row's next token is at column L
                ids[k, L - c.numel():] = c
                attn[k, L - c.numel():] = 1
            budgets = torch.tensor([max_new_tokens - len(rows[i].ids) for i in active])
            tool_rows = torch.tensor([rows[i].calls < max_tool_turns for i in active])
            gc = GenerationConfig(
                do_sample=not greedy, temperature=None if greedy else temperature,
                top_p=None if greedy else top_p, top_k=None if greedy else 0,
                max_new_tokens=int(budgets.max()), pad_token_id=pad, eos_token_id=eos, use_cache=True)
            stop = StoppingCriteriaList([_StopAtCodeBlock(tokenizer, L, tool_rows, budgets)])
            run = autocast if autocast is not None else torch.autocast("cpu", enabled=False)
            with run:
                out = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device), generation_config=gc,
                                     stopping_criteria=stop, logits_processor=logits_processor)
            out = out[:, L:].cpu()
            for k, i in enumerate(active):
                r = rows[i]
                new = out[k, : int(budgets[k])].tolist()
                end_eos = next((j + 1 for j, t in enumerate(new) if t in eos_set), None)
                end_code = _block_end(tokenizer, new[: end_eos or len(new)]) if bool(tool_rows[k]) else None
                if end_code is not None:
                    r.ids += new[:end_code]
                    r.mask += [1] * end_code
                    res = run_code(i, first_code_block(tokenizer.decode(new[:end_code], skip_special_tokens=True)) or "")
                    r.calls += 1
                    r.errors += int(res.status != "ok")
                    tool = tokenizer(tool_turn(res), add_special_tokens=False)["input_ids"]
                    room = max_new_tokens - len(r.ids)
                    r.ids += tool[:room]
                    r.mask += [0] * min(len(tool), room)
                    if len(tool) >= room:  # the budget ends inside (or right after) the tool's turn
                        r.done = r.truncated = True
                elif end_eos is not None:
                    r.ids += new[:end_eos]
                    r.mask += [1] * end_eos
                    r.done = True
                else:  # out of budget without an end
                    r.ids += new
                    r.mask += [1] * len(new)
                    r.done = r.truncated = True
    finally:
        if was_training:
            model.train()
    seqs: list[Sequence] = []
    for r in rows:
        ids = torch.tensor(r.ids, dtype=torch.long)
        text_ids = ids if r.truncated or not r.ids or r.ids[-1] not in eos_set else ids[:-1]
        seqs.append(Sequence(
            prompt_ids=r.prompt_ids, completion_ids=ids, text=tokenizer.decode(text_ids, skip_special_tokens=True),
            truncated=r.truncated, prompt_index=r.prompt_index, loss_mask=torch.tensor(r.mask, dtype=torch.float32),
            extra={"tool_calls": r.calls, "tool_errors": r.errors}))
    return seqs


class ToolRollouts:
    """Multi-turn rollouts for the trainer: ``model.generate`` on the policy, one session per
    trajectory on the reward server (opened for a chunk's groups together, released together).

    The sessions carry ``labels`` (the run and step) so an orphan sweep (``GET /v1/sessions?label=``)
    finds what a killed trainer left; the server's idle timeout (its default unless ``idle_timeout_s``)
    reaps them in any case.
    """

    def __init__(self, policy, tokenizer, client: SessionClient, max_new_tokens: int, top_p: float,
                 max_prompt_length: int, max_tool_turns: int, tool_timeout_s: float, autocast_fn,
                 idle_timeout_s: float | None = None):
        self.policy, self.tokenizer, self.client = policy, tokenizer, client
        self.max_new_tokens, self.top_p, self.max_prompt_length = max_new_tokens, top_p, max_prompt_length
        self.max_tool_turns, self.tool_timeout_s = max_tool_turns, tool_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._autocast = autocast_fn
        self.logits_processor = None  # tests script the policy's text through this

    def generate(self, prompt_texts: list[str], n: int, temperature: float, labels: dict[str, str]) -> list[Sequence]:
        with open_sessions(self.client, len(prompt_texts) * n, labels, self.idle_timeout_s) as ids:
            return generate_with_tools(
                self.policy, self.tokenizer, prompt_texts, n, self.max_new_tokens, temperature,
                lambda row, code: self.client.execute(ids[row], code, self.tool_timeout_s), self.max_tool_turns,
                self.top_p, self.max_prompt_length, self._autocast(), self.logits_processor)

    def close(self) -> None:
        self.client.close()
