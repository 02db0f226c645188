"""The GRPO training loop.

One step (``train_step``), top to bottom: take ``prompts_per_step`` prompts (this rank's shard)
-> rollout: sample ``group_size`` completions each and score them with every reward source
while the next chunk is generated -> keep groups: drop ``infra_error`` items from their groups
and groups whose reward std is below ``min_group_std`` (optionally refilling with more prompts)
-> advantages (``scale_rewards``) -> update: old and reference log-probs for what is kept, then
``num_iterations`` optimizer steps on the clipped surrogate + k3 KL -> record the step's
:class:`~trainer.metrics.StepStats`, reduced over ranks.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from . import checkpoint as ckpt
from . import dist, sharding
from .config import TrainConfig, dump_config
from .generation import make_generator
from .groups import keep_groups
from .hf_data import StreamingTaskStream, load_split, streaming_eval
from .loss import batch_std, group_advantages, grpo_loss, truncated_is_weights
from .memory import peak_rss_mb, reset_peak_rss, rss_mb, trim_heap
from .metrics import MetricsLogger, StepStats, UpdateStats, peak_memory_mb
from .model import (
    autocast_ctx,
    build_reference,
    load_policy,
    load_tokenizer,
    pick_device,
    reference_mode,
    trainable_parameters,
)
from .multiturn import TOOL_SYSTEM_PROMPT, ToolRollouts
from .rewards import HttpScorer, RewardMixer, Scored, Scorer, WaitClock
from .rollout import Sequence, collate, fill_logprobs, pad_rows, render_prompts, token_logprobs
from .tasks import TaskItem, TaskStream, build_split
from .tools import SessionClient

LOW_VARIANCE_WARN_SHARE = 0.9


def _log(msg: str) -> None:
    print(f"[grpo] {msg}", file=sys.stderr, flush=True)


def task_source(cfg: TrainConfig, train_items: list[TaskItem] | None, eval_items: list[TaskItem] | None
                ) -> tuple[TaskStream | StreamingTaskStream, list[TaskItem], list[TaskItem]]:
    """(training stream, training items, held-out items): the given lists, else a streamed
    dataset, an in-memory dataset, or the bundled generators / JSONL of ``cfg.tasks``."""
    if train_items is None and cfg.dataset is not None and cfg.dataset.streaming:
        held = eval_items if eval_items is not None else streaming_eval(cfg.dataset, cfg.num_eval_tasks)
        return StreamingTaskStream(cfg.dataset, cfg.num_eval_tasks, cfg.seed), [], held
    if train_items is None:
        if cfg.dataset is not None:
            train_items, built = load_split(cfg.dataset, cfg.num_train_tasks, cfg.num_eval_tasks, cfg.data_seed)
        else:
            train_items, built = build_split(cfg.tasks, cfg.num_train_tasks, cfg.num_eval_tasks, cfg.data_seed,
                                             cfg.arith_difficulty)
        eval_items = built if eval_items is None else eval_items
    return TaskStream(train_items, seed=cfg.seed), train_items, eval_items or []


class GRPOTrainer:
    def __init__(
        self,
        cfg: TrainConfig,
        scorer: Scorer | None = None,
        model=None,
        tokenizer=None,
        train_items: list[TaskItem] | None = None,
        eval_items: list[TaskItem] | None = None,
        step_hook: Callable[[GRPOTrainer, dict[str, Any]], None] | None = None,
    ):
        """``scorer`` is the server source's scorer (default: HTTP to ``reward_url``); it is only
        used when ``reward_sources`` has a ``kind: server`` entry."""
        self.cfg = cfg
        self.rank, self.world, self.local_rank = dist.world_info()
        self.device = pick_device(cfg.device, self.local_rank)
        self.distributed = dist.init(self.device)
        self.is_main = self.rank == 0
        self.step_hook = step_hook
        self.autocast_enabled = cfg.bf16_autocast and self.device.type == "cuda"

        # identical initialisation on every rank (LoRA init is random), then a per-rank sampling stream
        torch.manual_seed(cfg.seed)
        if model is None and self.is_main:
            _log(f"loading {cfg.model} ({'LoRA' if cfg.lora.enabled else 'full fine-tuning'}, device {self.device})")
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(cfg)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.policy = model if model is not None else load_policy(cfg, self.device)
        self.policy.to(self.device)
        self.policy.train()
        self.ref = build_reference(cfg, self.policy)
        self.generator = make_generator(cfg, self.policy, self.tokenizer, lambda: self.autocast, self.device,
                                        _log if self.is_main else (lambda m: None))
        # tools=python: multi-turn rollouts, one session per trajectory on the (first) reward server;
        # the run id labels the sessions so an orphan sweep can find them
        self.run_id = f"{Path(cfg.state_dir).name}-{uuid.uuid4().hex[:8]}"
        self.tools: ToolRollouts | None = None
        if cfg.tools == "python":
            self.tools = ToolRollouts(
                self.policy, self.tokenizer, SessionClient(cfg.reward_url[0], cfg.reward_token, cfg.reward_timeout_s),
                cfg.max_completion_length, cfg.top_p, cfg.max_prompt_length, cfg.max_tool_turns, cfg.tool_timeout_s,
                lambda: self.autocast)
        self.fsdp = self.distributed and cfg.parallelism == "fsdp"
        if self.fsdp:  # shard before the optimizer is built: its state then lives on the shards
            pdt = {"auto": torch.bfloat16 if self.device.type == "cuda" else None, "float32": None,
                   "bfloat16": torch.bfloat16}[cfg.fsdp_param_dtype]
            sharding.shard(self.policy, self.device, pdt)
            if self.ref is not None and self.ref is not self.policy:
                sharding.shard(self.ref, self.device, pdt)
        elif cfg.parallelism == "fsdp" and self.is_main:
            _log("parallelism=fsdp in a single process: nothing to shard, training unsharded")
        torch.manual_seed(cfg.seed * 1009 + self.rank)

        params = [p for _, p in trainable_parameters(self.policy)]
        if not params:
            raise RuntimeError("the model has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.learning_rate, betas=(cfg.adam_beta1, cfg.adam_beta2), weight_decay=cfg.weight_decay
        )
        warm = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm > 0 else 1.0
        )
        self.model = self.policy
        if self.distributed and not self.fsdp:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.model = DDP(self.policy, device_ids=[self.device.index] if self.device.type == "cuda" else None)

        self.stream, self.train_items, self.eval_items = task_source(cfg, train_items, eval_items)

        self._own_scorer = scorer is None and cfg.uses_server
        if self._own_scorer:
            scorer = HttpScorer(cfg.reward_url, cfg.reward_token, cfg.reward_timeout_s, cfg.reward_max_batch,
                                cfg.reward_weights)
        self.scorer: Scorer | None = scorer if cfg.uses_server else None
        self.rewards = RewardMixer(cfg.all_reward_sources, self.scorer, cfg.max_completion_length)
        self.state_dir = Path(cfg.state_dir)
        self.logger = MetricsLogger(self.state_dir, cfg.tensorboard, enabled=self.is_main, report_to=cfg.report_to,
                                    project=cfg.project, run_config=cfg.model_dump(mode="json"))
        self.step = 0
        self.elapsed_s = 0.0  # training wall time so far (persisted), for the cost cap
        self.peak_rss_mb = rss_mb() or 0.0  # running max of the per-step peaks: the process's peak
        self.baseline: dict[str, Any] | None = None
        self.last_eval: dict[str, Any] | None = None
        if cfg.resume:
            self._resume()
        if self.is_main:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            (self.state_dir / "config.yaml").write_text(dump_config(cfg))

    # ------------------------------------------------------------------------------- helpers
    @property
    def autocast(self):
        return autocast_ctx(self.device, self.autocast_enabled)

    @contextlib.contextmanager
    def _gathered(self):
        """Under FSDP: policy (and a separate reference) unsharded for a rollout or eval phase,
        entered once per phase on every rank, so generation and no-grad log-prob passes make no
        collective call whatever each rank's lengths. A no-op otherwise."""
        with contextlib.ExitStack() as stack:
            if self.fsdp:
                stack.enter_context(sharding.gathered(self.policy))
                if self.ref is not None and self.ref is not self.policy:
                    stack.enter_context(sharding.gathered(self.ref))
            yield

    def _prompts(self, items: list[TaskItem]) -> list[str]:
        system = self.cfg.system_prompt
        if system is None and self.tools is not None:
            system = TOOL_SYSTEM_PROMPT
        return render_prompts(self.tokenizer, [t.prompt for t in items], system)

    def _gen(self, items: list[TaskItem], n: int, temperature: float) -> list[Sequence]:
        if self.tools is not None:  # sessions opened for these groups and released before this returns
            labels = {"grpo_run": self.run_id, "grpo_step": str(self.step), "grpo_rank": str(self.rank)}
            return self.tools.generate(self._prompts(items), n, temperature, labels)
        return self.generator.generate(self._prompts(items), n, temperature)

    def _micro(self) -> int:
        """Sequences per forward pass: an accumulation chunk, capped by ``micro_batch_size``."""
        per_step = self.cfg.prompts_per_step * self.cfg.group_size
        rows = max(1, math.ceil(per_step / self.cfg.gradient_accumulation_steps))
        return min(rows, self.cfg.micro_batch_size) if self.cfg.micro_batch_size else rows

    def _score(self, items: list[TaskItem], seqs: list[Sequence], tag: str):
        """Submit one chunk to every reward source; returns a future of :class:`Scored` values."""
        payload = [
            {"id": f"{tag}-{self.rank}-{i}", "completion": s.text, "task": items[s.prompt_index].task}
            for i, s in enumerate(seqs)
        ]
        return self.rewards.submit(payload, [int(s.completion_ids.numel()) for s in seqs],
                                   [s.truncated for s in seqs], [items[s.prompt_index].prompt for s in seqs])

    # ------------------------------------------------------------------------------- rollouts
    def _rollout_round(self, items: list[TaskItem], clock: WaitClock, tag: str, st: StepStats) -> list[list[Sequence]]:
        """Generate + score + keep groups for ``items``; returns the kept groups."""
        cfg = self.cfg
        chunk = cfg.generation_batch_size or self._auto_generation_chunk(len(items))
        pending: list[tuple[list[TaskItem], list[Sequence], Any]] = []
        for k in range(0, len(items), chunk):
            part = items[k : k + chunk]
            t0 = time.perf_counter()
            seqs = self._gen(part, cfg.group_size, cfg.temperature)
            st.gen_time += time.perf_counter() - t0
            pending.append((part, seqs, self._score(part, seqs, f"{tag}-{k}")))
        kept: list[list[Sequence]] = []
        for part, seqs, fut in pending:
            scores: list[Scored] = clock.result(fut, timeout=cfg.reward_timeout_s * 4)
            for s, sc in zip(seqs, scores, strict=True):
                n = int(s.completion_ids.numel())
                st.completions += 1
                st.tokens += n
                st.len_max = max(st.len_max, n)
                st.truncated += int(s.truncated)
                st.add_tools(s.extra)
                if not sc.ok:
                    st.infra_errors += 1
                    continue
                s.reward = float(sc.reward)  # type: ignore[arg-type]
                s.extra["flags"] = sc.flags
                st.add_scored(s.reward, sc.sources, sc.flags)
            res = keep_groups(seqs, [s.prompt_index for s in seqs], [s.reward for s in seqs], len(part),
                              cfg.min_group_std)
            st.groups += res.groups
            st.filtered += res.filtered
            st.filtered_all_same += res.all_same
            kept += res.kept
            # log-probs of this chunk's kept groups while later chunks are still being scored
            self._fill_logprobs([s for g in res.kept for s in g if self._in_loss(s)], st)
        return kept

    def _auto_generation_chunk(self, n_prompts: int) -> int:
        """Prompts per generate() call when ``generation_batch_size`` is 0. One call for the whole
        batch, unless a log-prob pass (reference or old policy) can run on the first half while the
        server grades the second: a decode step reads every weight once whatever its row count, so
        on a CPU one call of 32 rows takes well under two of 16 (as TRL's single call does)."""
        if self.ref is None and self.cfg.num_iterations == 1:
            return max(1, n_prompts)
        return max(1, math.ceil(n_prompts / 2))

    def _in_loss(self, s: Sequence) -> bool:
        """mask_truncated_completions (DAPO's overlong filtering): a truncated completion's reward
        still shapes its group's advantages, but its tokens get no gradient."""
        return not (self.cfg.mask_truncated_completions and s.truncated)

    def _fill_logprobs(self, seqs: list[Sequence], st: StepStats) -> None:
        if not seqs:
            return
        t0 = time.perf_counter()
        pad = self.tokenizer.pad_token_id
        if self.cfg.num_iterations > 1:
            fill_logprobs(self.policy, seqs, "old_logp", self.cfg.temperature, self._micro(), pad, self.autocast)
        if self.ref is not None:
            with reference_mode(self.ref, self.policy):
                fill_logprobs(self.ref, seqs, "ref_logp", self.cfg.temperature, self._micro(), pad, self.autocast)
        st.logprob_time += time.perf_counter() - t0

    def _advantages(self, kept: list[list[Sequence]]) -> None:
        """Set ``seq.advantage`` for every kept sequence: group mean, ``scale_rewards`` std."""
        seqs = [s for g in kept for s in g]
        rewards = [float(s.reward) for s in seqs]  # type: ignore[arg-type]
        mode = self.cfg.reward_scaling
        bstd = None
        if mode == "batch":  # the std of every kept reward on every rank
            tot, sq, n = dist.all_reduce([sum(rewards), sum(r * r for r in rewards), float(len(rewards))])
            bstd = batch_std(tot, sq, n)
        if not seqs:
            return
        gids = torch.tensor([gi for gi, g in enumerate(kept) for _ in g])
        adv, _ = group_advantages(torch.tensor(rewards), gids, self.cfg.epsilon, mode, bstd)
        for s, a in zip(seqs, adv.tolist(), strict=True):
            s.advantage = a

    # ------------------------------------------------------------------------------- one step
    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        reset_peak_rss()
        t_start = time.perf_counter()
        clock = WaitClock()
        st = StepStats.for_sources(self.rewards.names)

        # take + rollout + keep groups (refill rounds top up a batch thinned by the filter)
        target = cfg.prompts_per_step
        kept: list[list[Sequence]] = []
        rounds = 0
        want = target
        with self._gathered():
            while True:
                global_items = self.stream.take(want * self.world)  # same on every rank: same data position
                mine = global_items[self.rank :: self.world]
                if len(kept) < target:
                    kept += self._rollout_round(mine, clock, f"s{self.step}r{rounds}", st)
                rounds += 1
                deficit = dist.all_reduce([float(max(0, target - len(kept)))], op="max")[0]
                if deficit <= 0 or rounds > cfg.max_refill_rounds:
                    break
                want = int(deficit)
        kept = kept[:target]

        # advantages over whole groups, then the loss over the sequences that are not masked
        self._advantages(kept)
        seqs = [s for g in kept for s in g if self._in_loss(s)]
        st.kept_groups = float(len(kept))
        st.kept_seqs = float(len(seqs))
        st.masked_truncated = float(sum(len(g) for g in kept) - len(seqs))
        st.loss_tokens = float(sum(s.policy_tokens for s in seqs))

        # update: global normalisers so micro-batches and ranks add up to the loss of the whole batch
        n_seqs, n_tokens = dist.all_reduce([st.kept_seqs, st.loss_tokens])
        upd = UpdateStats.empty()
        t_upd = time.perf_counter()
        if n_seqs > 0:
            upd = self._update(seqs, n_seqs, n_tokens)
            self.generator.sync_weights()  # a separate sampler (vLLM) gets the new weights
        upd_time = time.perf_counter() - t_upd

        # record
        step_peak_rss = peak_rss_mb()
        self.peak_rss_mb = max(self.peak_rss_mb, step_peak_rss)
        # the update's activations are freed by now; hand their heap pages back to the OS, or the
        # process keeps the high-water mark of every step resident (see trainer/memory.py)
        trim_heap()
        step_time = time.perf_counter() - t_start
        self.step += 1
        self.elapsed_s += step_time
        st.wait = clock.waited
        st.step_time = step_time
        tot = st.reduced()
        gpu_peak = peak_memory_mb(self.device)
        rec = {
            "kind": "train",
            "step": self.step,
            **tot.record(),
            "refill_rounds": rounds - 1,
            **upd,
            "lr": self.scheduler.get_last_lr()[0],
            "step_time_s": step_time,
            "gen_time_s": tot.gen_time / self.world,
            "logprob_time_s": tot.logprob_time / self.world,
            "update_time_s": upd_time,
            "tokens_per_s": tot.tokens / max(step_time, 1e-9),
            "reward_wait_share": tot.wait / max(tot.step_time, 1e-9),
            # process peak so far: GPU memory allocated on CUDA, else the host's resident set
            "peak_mem_mb": gpu_peak if gpu_peak is not None else self.peak_rss_mb,
            "peak_rss_mb": step_peak_rss,  # this step's peak resident set
            "rss_mb": rss_mb(),
            "data_position": self.stream.position,
            "epoch": self.stream.epoch,
            "elapsed_s": self.elapsed_s,
            "cost_usd": self.cost_so_far(),
        }
        if seqs and self.is_main:
            rec["sample"] = seqs[0].text[:300]
        self.logger.log(rec)
        return rec

    def _update(self, seqs: list[Sequence], n_seqs: float, n_tokens: float) -> dict[str, float]:
        cfg = self.cfg
        parts = cfg.gradient_accumulation_steps
        size = math.ceil(len(seqs) / parts) if seqs else 0
        chunks = [seqs[i * size : (i + 1) * size] if size else [] for i in range(parts)]
        # each accumulation chunk in forward/backward passes of at most micro_batch_size sequences:
        # the loss normalisers are global, so this gives the same gradient with bounded memory
        passes: list[list[Sequence]] = []
        for chunk in chunks:
            rows = cfg.micro_batch_size or max(len(chunk), 1)
            passes += [chunk[j : j + rows] for j in range(0, len(chunk), rows)] or [[]]
        if self.fsdp:  # every FSDP forward/backward is a collective: the same pass count on every rank
            most = int(dist.all_reduce([float(len(passes))], op="max")[0])
            passes += [[] for _ in range(most - len(passes))]
        # DDP averages gradients over ranks; scale so the sum over ranks is the global batch loss
        norm_seqs = n_seqs / self.world
        norm_tokens = n_tokens / self.world
        pad = self.tokenizer.pad_token_id
        stats = UpdateStats()
        for _it in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            for ci, chunk in enumerate(passes):
                last = ci == len(passes) - 1
                if self.fsdp:  # reduce-scatter gradients on the last pass only, as DDP's no_sync
                    sharding.set_gradient_sync(self.policy, last)
                    sync = nullcontext()
                else:
                    sync = self.model.no_sync() if (self.distributed and not last) else nullcontext()
                with sync:
                    if not chunk:
                        if self.distributed:  # keep the collective in step with ranks that have data
                            dummy = torch.full((1, 1), pad, dtype=torch.long, device=self.device)
                            with self.autocast:
                                out = self.model(input_ids=dummy, use_cache=False)
                            (out.logits.float().sum() * 0.0).backward()
                        continue
                    b = collate(chunk, pad, self.device)
                    T = b.completion_mask.shape[1]
                    logp = token_logprobs(self.model, b, cfg.temperature, self.autocast)
                    old = (pad_rows([s.old_logp for s in chunk], T, self.device) if cfg.num_iterations > 1
                           else logp.detach())
                    ref = pad_rows([s.ref_logp for s in chunk], T, self.device) if self.ref is not None else None
                    adv = torch.tensor([s.advantage for s in chunk], device=self.device)
                    isw = None
                    if cfg.tis_cap is not None and all(s.rollout_logp is not None for s in chunk):
                        # the sampler's log-probs differ from the trainer's (kernels, bf16): TIS
                        roll = pad_rows([s.rollout_logp for s in chunk], T, self.device)
                        isw = truncated_is_weights(old.detach(), roll, cfg.tis_cap) * b.completion_mask
                    out = grpo_loss(
                        logp, old, adv, b.completion_mask,
                        clip_ratio=cfg.clip_ratio, clip_ratio_high=cfg.clip_ratio_high,
                        ref_logp=ref, kl_coeff=cfg.kl_coeff, loss_type=cfg.loss_type,
                        max_completion_length=cfg.max_completion_length,
                        num_seqs=norm_seqs, num_tokens=norm_tokens,
                        importance_sampling_level=cfg.importance_sampling_level, is_weights=isw,
                    )
                    out.loss.backward()
                    stats.add(out, cfg.num_iterations)
            params = [p for _, p in trainable_parameters(self.policy)]
            if cfg.max_grad_norm > 0:
                gn = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            else:
                gn = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in params if p.grad is not None))
            stats.grad_norm = float(sharding.full_tensor(gn))  # FSDP: a DTensor over the shards
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return stats.record(self.world)

    # ------------------------------------------------------------------------------- eval
    def evaluate(self, tag: str = "eval", group_check: bool = False) -> dict[str, Any]:
        """Held-out reward: ``eval_samples`` completions per prompt at ``eval_temperature``
        (0 = greedy). With ``group_check``, also sample ``eval_group_size`` completions per prompt
        at the training temperature and report the share of groups the trainer would drop.

        Sampling runs on a forked RNG seeded by (seed, step, rank), so an eval never shifts the
        training stream: a run with a baseline eval samples the same rollouts as one without
        (``demo --seeds 0,1`` reuses seed 0's baseline for seed 1). With ``completions_table`` the
        eval's (prompt, completion, reward, per-source values, flags) rows go to
        ``<state_dir>/completions/<tag>-step<N>.jsonl``."""
        cfg = self.cfg
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), self._gathered():
            torch.manual_seed(cfg.seed * 7919 + self.step * 104729 + self.rank + 17)
            rec, rows = self._evaluate(tag, group_check)
        if cfg.completions_table:
            rows = dist.gather_objects(rows)
            if self.is_main:
                d = self.state_dir / "completions"
                d.mkdir(parents=True, exist_ok=True)
                path = d / f"{tag}-step{self.step:06d}.jsonl"
                with open(path, "w") as f:
                    for r in rows:
                        f.write(json.dumps(r) + "\n")
                rec["completions_table"] = str(path)
                self.logger.log_table(f"completions/{tag}", rows, self.step)
        self.logger.log(rec)
        return rec

    def _evaluate(self, tag: str, group_check: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        cfg = self.cfg
        items = self.eval_items[self.rank :: self.world]
        t0 = time.perf_counter()
        st = StepStats.for_sources(self.rewards.names)
        rows: list[dict[str, Any]] = []
        chunk = max(1, cfg.prompts_per_step * cfg.group_size // max(cfg.eval_samples, 1))
        n = 1 if cfg.eval_temperature == 0 else cfg.eval_samples
        for k in range(0, len(items), chunk):
            part = items[k : k + chunk]
            seqs = self._gen(part, n, cfg.eval_temperature)
            scores: list[Scored] = self._score(part, seqs, f"{tag}{self.step}-{k}").result()
            for s, sc in zip(seqs, scores, strict=True):
                st.completions += 1
                st.tokens += int(s.completion_ids.numel())
                st.truncated += int(s.truncated)
                st.add_tools(s.extra)
                if sc.ok:
                    st.add_scored(float(sc.reward), sc.sources, sc.flags)  # type: ignore[arg-type]
                else:
                    st.infra_errors += 1
                if cfg.completions_table:
                    rows.append({"prompt": part[s.prompt_index].prompt, "task_id": part[s.prompt_index].id,
                                 "completion": s.text, "reward": sc.reward, "sources": sc.sources,
                                 "flags": sc.flags, "truncated": s.truncated})
        if group_check and cfg.eval_group_prompts:
            gitems = self.eval_items[: cfg.eval_group_prompts][self.rank :: self.world]
            gchunk = max(1, cfg.prompts_per_step)
            for k in range(0, len(gitems), gchunk):
                part = gitems[k : k + gchunk]
                seqs = self._gen(part, cfg.eval_group_size, cfg.temperature)
                scores = self._score(part, seqs, f"{tag}g{k}").result()
                res = keep_groups(seqs, [s.prompt_index for s in seqs], [sc.reward if sc.ok else None for sc in scores],
                                  len(part), cfg.min_group_std)
                st.groups += res.groups
                st.filtered += res.filtered
        tot = st.reduced()
        r = tot.record()
        rec: dict[str, Any] = {
            "kind": "eval",
            "tag": tag,
            "step": self.step,
            "reward_mean": r["reward_mean"],
            "n": int(tot.reward_n),
            "infra_errors": int(tot.infra_errors),
            "truncated_share": r["truncated_share"],
            "completion_len_mean": r["completion_len_mean"],
            "flagged_share": r["flagged_share"],
            **({k: r[k] for k in ("tool_call_rate", "tool_calls_mean", "tool_error_share")} if self.tools else {}),
            **{k: v for k, v in r.items() if k.startswith("reward/")},
            "eval_time_s": time.perf_counter() - t0,
        }
        if group_check and tot.groups:
            rec["low_variance_share"] = tot.filtered / tot.groups
        return rec, rows

    # ------------------------------------------------------------------------------- state
    def cost_so_far(self) -> float:
        return self.elapsed_s / 3600.0 * self.cfg.price_per_hour * self.world

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "data_position": self.stream.position,
            "elapsed_s": self.elapsed_s,
            "world_size": self.world,
            "baseline": self.baseline,
            "last_eval": self.last_eval,
            "config": self.cfg.model_dump(mode="json"),
        }

    def save_checkpoint(self) -> Path | None:
        tmp = ckpt.tmp_path(self.state_dir, self.step)
        if self.is_main:
            tmp.mkdir(parents=True, exist_ok=True)
        dist.barrier()
        ckpt.write_rank_rng(tmp, self.rank)
        if self.fsdp:
            ckpt.write_sharded(tmp, self.policy, self.optimizer)
        dist.barrier()
        final = None
        if self.is_main:
            if self.fsdp:
                ckpt.write_scheduler(tmp, self.scheduler, self.state())
            else:
                ckpt.write_main(tmp, self.policy, self.optimizer, self.scheduler, self.state())
            final = ckpt.finalize(self.state_dir, tmp, self.step, self.cfg.keep_checkpoints)
        dist.barrier()
        return final

    def _resume(self) -> None:
        path = ckpt.latest_checkpoint(self.state_dir)
        if path is None:
            _log(f"--resume: no checkpoint under {self.state_dir}; starting fresh")
            return
        if self.fsdp:
            st = ckpt.load_sharded(path, self.policy, self.optimizer, self.scheduler, self.rank)
        else:
            st = ckpt.load(path, self.policy, self.optimizer, self.scheduler, self.rank)
        if st.get("world_size", 1) != self.world:
            warnings.warn(
                f"checkpoint written with world size {st.get('world_size')} resumed with {self.world}: "
                "the data order stays exact, the sampling RNG streams do not", stacklevel=2)
        self.step = int(st["step"])
        self.stream.position = int(st["data_position"])
        self.elapsed_s = float(st.get("elapsed_s", 0.0))
        self.baseline = st.get("baseline")
        self.last_eval = st.get("last_eval")
        if self.is_main:
            _log(f"resumed from {path} at step {self.step}, data position {self.stream.position}")

    # ------------------------------------------------------------------------------- loop
    def train(self) -> dict[str, Any]:
        cfg = self.cfg
        result: dict[str, Any] = {"stopped": "max_steps"}
        if cfg.baseline_eval and self.baseline is None and self.eval_items:
            if self.is_main:  # the longest silent stretch of a run: say what runs
                n = 1 if cfg.eval_temperature == 0 else cfg.eval_samples
                g = min(cfg.eval_group_prompts, len(self.eval_items))
                _log(f"baseline eval: {len(self.eval_items)} held-out prompts x {n} "
                     f"{'greedy' if cfg.eval_temperature == 0 else 'sampled'} completion(s)"
                     + (f", then {g} prompts x {cfg.eval_group_size} samples at temperature {cfg.temperature} "
                        "for the variance check" if g else "") + " ...")
            self.baseline = self.evaluate("baseline", group_check=True)
            lv = self.baseline.get("low_variance_share")
            if self.is_main:
                _log(f"baseline held-out reward {self.baseline['reward_mean']} "
                     f"(low-variance groups {lv if lv is None else f'{lv:.0%}'})")
                if lv is not None and lv >= LOW_VARIANCE_WARN_SHARE:
                    warnings.warn(
                        f"{lv:.0%} of held-out groups of {cfg.eval_group_size} samples have (nearly) the same "
                        "reward: GRPO has no signal there. Use easier/harder tasks, a higher temperature or "
                        "graded rewards.", stacklevel=2)
        bar = None
        if cfg.progress_bar and self.is_main:
            from tqdm import tqdm

            bar = tqdm(total=cfg.max_steps, initial=self.step, desc="grpo", dynamic_ncols=True)
        try:
            while self.step < cfg.max_steps:
                if cfg.max_cost_usd is not None and self.step > 0:
                    per_step = self.elapsed_s / self.step * cfg.price_per_hour * self.world / 3600.0
                    if self.cost_so_far() + per_step > cfg.max_cost_usd:
                        result = {"stopped": "max_cost_usd", "cost_usd": self.cost_so_far()}
                        if self.is_main:
                            _log(f"stopping: the next step would take the cost past max_cost_usd="
                                 f"{cfg.max_cost_usd} (spent {self.cost_so_far():.4f})")
                        break
                rec = self.train_step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(reward=f"{rec['reward_mean'] or 0:.3f}", filt=f"{rec['filtered_share']:.2f}",
                                    wait=f"{rec['reward_wait_share']:.2f}")
                if self.step_hook is not None:
                    self.step_hook(self, rec)
                if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.max_steps and self.eval_items:
                    self.last_eval = self.evaluate("eval")
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
        if self.eval_items:
            self.last_eval = self.evaluate("final")
        if not cfg.save_every or self.step % cfg.save_every != 0:
            self.save_checkpoint()
        if cfg.export_final:
            self.export(self.state_dir / "final")
            result["final_model"] = str(self.state_dir / "final")
        result.update(
            step=self.step,
            data_position=self.stream.position,
            baseline=self.baseline,
            final=self.last_eval,
            metrics=str(self.logger.path),
        )
        return result

    def close(self) -> None:
        self.logger.close()
        if self.tools is not None:
            self.tools.close()
        if self._own_scorer:
            self.scorer.close()

    def export(self, out_dir: str | os.PathLike) -> None:
        """save_pretrained of the trained model (the adapter only, under LoRA) and tokenizer. Under
        FSDP the full state is gathered to rank 0's CPU first (every rank takes part)."""
        sd = None
        if self.fsdp:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            sd = get_model_state_dict(self.policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.is_main:
            if sd is not None:
                self.policy.save_pretrained(out_dir, state_dict=sd)
            else:
                self.policy.save_pretrained(out_dir)
            self.tokenizer.save_pretrained(out_dir)
