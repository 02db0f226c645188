"""Sampling completions and computing their per-token log-probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .logprobs import selective_log_softmax


@dataclass
class Sequence:
    """One sampled completion, unpadded. ``completion_ids`` ends with EOS unless truncated."""

    prompt_ids: torch.Tensor  # [P] (no padding)
    completion_ids: torch.Tensor  # [T] (no padding; includes the EOS that ended it)
    text: str
    truncated: bool
    prompt_index: int  # index of the prompt in the generate() call
    reward: float | None = None
    advantage: float = 0.0
    old_logp: torch.Tensor | None = None  # [T]
    ref_logp: torch.Tensor | None = None  # [T]
    rollout_logp: torch.Tensor | None = None  # [T] the sampler's own log-probs (vLLM), for TIS
    # [T] 1 on the policy's tokens, 0 on tool-turn tokens (multi-turn tool rollouts); None: all 1
    loss_mask: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)

    @property
    def policy_tokens(self) -> int:
        """Tokens the policy sampled (those in the loss): all of them unless a tool wrote some."""
        return int(self.completion_ids.numel()) if self.loss_mask is None else int(self.loss_mask.sum())


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, P+T]
    attention_mask: torch.Tensor  # [B, P+T]
    position_ids: torch.Tensor  # [B, P+T]
    completion_mask: torch.Tensor  # [B, T]
    prompt_len: int


def render_prompts(tokenizer, prompts: list[str], system_prompt: str | None = None) -> list[str]:
    out = []
    for p in prompts:
        msgs = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": p}
        ]
        out.append(tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
    return out


def eos_ids(tokenizer, model) -> list[int]:
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, list | tuple):
        ids.update(int(i) for i in gen_eos)
    return sorted(ids)


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompt_texts: list[str],
    n_per_prompt: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    max_prompt_length: int = 1024,
    autocast=None,
) -> list[Sequence]:
    """Sample ``n_per_prompt`` completions per prompt (``temperature=0``: greedy).

    A completion stops at the first EOS (kept, masked in) or at ``max_new_tokens`` (truncated).
    """
    from transformers import GenerationConfig

    device = next(model.parameters()).device
    tokenizer.padding_side = "left"
    tokenizer.truncation_side = "left"
    enc = tokenizer(
        prompt_texts, return_tensors="pt", padding=True, truncation=True,
        max_length=max_prompt_length, add_special_tokens=False,
    )
    input_ids = enc["input_ids"].repeat_interleave(n_per_prompt, dim=0).to(device)
    attn = enc["attention_mask"].repeat_interleave(n_per_prompt, dim=0).to(device)
    eos = eos_ids(tokenizer, model)
    greedy = temperature == 0
    gc = GenerationConfig(
        do_sample=not greedy,
        temperature=None if greedy else temperature,
        top_p=None if greedy else top_p,
        top_k=None if greedy else 0,
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=eos,
        use_cache=True,
    )
    was_training = model.training
    model.eval()
    try:
        ctx = autocast if autocast is not None else torch.autocast("cpu", enabled=False)
        with ctx:
            out = model.generate(input_ids=input_ids, attention_mask=attn, generation_config=gc)
    finally:
        if was_training:
            model.train()
    P = input_ids.shape[1]
    comp = out[:, P:].cpu()
    eos_t = torch.tensor(eos)
    seqs: list[Sequence] = []
    prompt_rows = enc["input_ids"]
    prompt_masks = enc["attention_mask"].bool()
    for i in range(comp.shape[0]):
        row = comp[i]
        is_eos = torch.isin(row, eos_t)
        if bool(is_eos.any()):
            end = int(is_eos.nonzero()[0, 0]) + 1
            truncated = False
        else:
            end = row.shape[0]
            truncated = True
        ids = row[:end].clone()
        text_ids = ids[:-1] if not truncated else ids
        j = i // n_per_prompt
        seqs.append(
            Sequence(
                prompt_ids=prompt_rows[j][prompt_masks[j]].clone(),
                completion_ids=ids,
                text=tokenizer.decode(text_ids, skip_special_tokens=True),
                truncated=truncated,
                prompt_index=j,
            )
        )
    return seqs


def collate(seqs: list[Sequence], pad_id: int, device: torch.device) -> Batch:
    """Left-pad prompts, right-pad completions, so completions start at one common column. The
    completion mask is each sequence's ``loss_mask`` where it has one: tool tokens stay in the input
    (the policy was conditioned on them) but get no log-prob, ratio, KL or loss term."""
    P = max(int(s.prompt_ids.numel()) for s in seqs)
    T = max(int(s.completion_ids.numel()) for s in seqs)
    B = len(seqs)
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + T), dtype=torch.long)
    cmask = torch.zeros((B, T), dtype=torch.float32)
    for i, s in enumerate(seqs):
        p, t = s.prompt_ids.numel(), s.completion_ids.numel()
        ids[i, P - p : P] = s.prompt_ids
        ids[i, P : P + t] = s.completion_ids
        attn[i, P - p : P + t] = 1
        cmask[i, :t] = 1.0 if s.loss_mask is None else s.loss_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids.to(device), attn.to(device), pos.to(device), cmask.to(device), P)


def token_logprobs(model, batch: Batch, temperature: float, autocast=None) -> torch.Tensor:
    """log pi(token) of every completion token under ``softmax(logits / temperature)``: [B, T]."""
    ctx = autocast if autocast is not None else torch.autocast("cpu", enabled=False)
    P = batch.prompt_len
    T = batch.completion_mask.shape[1]
    kwargs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  position_ids=batch.position_ids, use_cache=False)
    with ctx:
        try:
            # only the positions that predict completion tokens go through the LM head
            logits = model(**kwargs, logits_to_keep=T + 1).logits
            start = 0
        except TypeError:  # a model without logits_to_keep
            logits = model(**kwargs).logits
            start = P - 1
    # position start + j predicts completion token j; the last kept position predicts nothing
    return selective_log_softmax(logits, batch.input_ids[:, P:], start, temperature) * batch.completion_mask


@torch.no_grad()
def fill_logprobs(model, seqs: list[Sequence], attr: str, temperature: float, micro_batch: int, pad_id: int,
                  autocast=None) -> None:
    """Set ``seq.<attr>`` (old_logp / ref_logp) for every sequence, ``micro_batch`` at a time."""
    if not seqs:
        return
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for k in range(0, len(seqs), micro_batch):
            chunk = seqs[k : k + micro_batch]
            b = collate(chunk, pad_id, device)
            lp = token_logprobs(model, b, temperature, autocast).cpu()
            for s, row in zip(chunk, lp, strict=True):
                setattr(s, attr, row[: s.completion_ids.numel()].clone())
    finally:
        if was_training:
            model.train()


def pad_rows(rows: list[torch.Tensor], T: int, device: torch.device) -> torch.Tensor:
    out = torch.zeros((len(rows), T), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out.to(device)
