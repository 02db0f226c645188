"""Generation backends behind one interface: ``model.generate`` (default, every device) and vLLM
in colocate mode (same process and GPU; the optional ``vllm`` extra).

Whatever samples, the trainer recomputes the log-probs it trains on (``token_logprobs``), so the
importance ratio is always the trainer's own; a backend that reports its sampling log-probs puts
them on ``Sequence.rollout_logp`` for the truncated importance-sampling correction (``tis_cap``).
Where vLLM is not installed the trainer says so and uses ``generate``. A vLLM *server* on other
GPUs is not built (TRL's ``vllm-serve`` covers that shape).
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

import torch

from .rollout import Sequence, eos_ids, generate
from .sharding import full_tensor


class Generator(Protocol):
    name: str

    def generate(self, prompt_texts: list[str], n: int, temperature: float) -> list[Sequence]: ...

    def sync_weights(self) -> None:
        """Make the sampler see the policy's current weights (after every optimizer step)."""


class HFGenerator:
    """``model.generate`` on the policy itself: always in sync, no copy of the weights."""

    name = "generate"

    def __init__(self, policy, tokenizer, max_new_tokens: int, top_p: float, max_prompt_length: int,
                 autocast_fn):
        self.policy, self.tokenizer = policy, tokenizer
        self.max_new_tokens, self.top_p, self.max_prompt_length = max_new_tokens, top_p, max_prompt_length
        self._autocast = autocast_fn

    def generate(self, prompt_texts: list[str], n: int, temperature: float) -> list[Sequence]:
        return generate(self.policy, self.tokenizer, prompt_texts, n, self.max_new_tokens, temperature,
                        self.top_p, self.max_prompt_length, self._autocast())

    def sync_weights(self) -> None:
        return None


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


class VLLMColocate:
    """vLLM's ``LLM`` in this process on the trainer's GPU (written against vLLM's public API;
    not run in this repository's CI, which has no GPU).

    ``gpu_memory_utilization`` bounds its KV cache beside the trainer; with ``sleep`` the engine
    frees its weights and cache between rollouts (``LLM.sleep`` / ``wake_up``, vLLM's sleep mode).
    Weights are copied in after every update: full fine-tuning sends the policy's state dict, LoRA
    merges the adapters, sends the merged weights, and unmerges (as TRL's colocate mode does).
    """

    name = "vllm"

    def __init__(self, policy, tokenizer, max_new_tokens: int, top_p: float, max_prompt_length: int,
                 gpu_memory_utilization: float, sleep: bool, seed: int):
        import os
        import tempfile

        from safetensors.torch import save_file

        # the engine in this process (not a worker subprocess), so its model can take weights directly
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.policy, self.tokenizer = policy, tokenizer
        self.max_new_tokens, self.top_p, self.max_prompt_length = max_new_tokens, top_p, max_prompt_length
        self.sleep = sleep
        # vLLM starts from the trainer's own weights in HF layout (config, tokenizer, safetensors):
        # the same path for hub dirs, GGUF-loaded models and LoRA-wrapped ones
        self._dir = tempfile.TemporaryDirectory(prefix="grpo-vllm-")
        base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
        base.config.save_pretrained(self._dir.name)
        tokenizer.save_pretrained(self._dir.name)
        save_file({k: v.contiguous() for k, v in self._weights()}, f"{self._dir.name}/model.safetensors")
        kw = dict(model=self._dir.name, dtype="bfloat16", gpu_memory_utilization=gpu_memory_utilization,
                  enable_sleep_mode=sleep, seed=seed, max_model_len=max_prompt_length + max_new_tokens,
                  enable_prefix_caching=True)
        # log-probs of the distribution actually sampled (after temperature / top-p), which is what
        # the trainer's log-probs are; vLLM's default is the raw model distribution
        try:
            self.llm = LLM(**kw, logprobs_mode="processed_logprobs")
            self.processed_logprobs = True
        except TypeError:  # an older vLLM without logprobs_mode: its log-probs are not comparable
            self.llm = LLM(**kw)
            self.processed_logprobs = False
        self._eos = set(eos_ids(tokenizer, policy))
        if sleep:
            self.llm.sleep(level=1)

    def _weights(self) -> list[tuple[str, torch.Tensor]]:
        model = self.policy
        if hasattr(model, "merge_adapter"):  # LoRA: merged weights under the base model's names
            model.merge_adapter()
            try:
                sd = model.get_base_model().state_dict()
                out = [(k.replace(".base_layer", ""), v.detach().to(torch.bfloat16)) for k, v in sd.items()
                       if "lora_" not in k]
            finally:
                model.unmerge_adapter()
            return out
        return [(k, full_tensor(v.detach()).to(torch.bfloat16)) for k, v in model.state_dict().items()]

    def sync_weights(self) -> None:
        weights = self._weights()
        if self.sleep:
            self.llm.wake_up()
        driver = getattr(getattr(self.llm.llm_engine, "model_executor", None), "driver_worker", None)
        worker = getattr(driver, "worker", driver)  # V1 wraps the worker; V0 is the worker
        runner = getattr(worker, "model_runner", None)
        if runner is not None:
            runner.model.load_weights(weights)
        else:  # an executor without an in-process driver: run the load on each worker
            self.llm.collective_rpc(lambda w: w.model_runner.model.load_weights(weights))
        if self.sleep:
            self.llm.sleep(level=1)

    def generate(self, prompt_texts: list[str], n: int, temperature: float) -> list[Sequence]:
        from vllm import SamplingParams

        enc = self.tokenizer(prompt_texts, add_special_tokens=False, truncation=True,
                             max_length=self.max_prompt_length)["input_ids"]
        greedy = temperature == 0
        params = SamplingParams(n=1 if greedy else n, temperature=0.0 if greedy else temperature,
                                top_p=1.0 if greedy else self.top_p, max_tokens=self.max_new_tokens, logprobs=0,
                                stop_token_ids=sorted(self._eos))
        if self.sleep:
            self.llm.wake_up()
        try:
            outs = self.llm.generate([{"prompt_token_ids": ids} for ids in enc], params, use_tqdm=False)
        finally:
            if self.sleep:
                self.llm.sleep(level=1)
        seqs: list[Sequence] = []
        for j, (ids, out) in enumerate(zip(enc, outs, strict=True)):
            comps = out.outputs * (n if greedy else 1)
            for c in comps:
                toks = list(c.token_ids)
                truncated = not (toks and toks[-1] in self._eos)
                lp = ([d[t].logprob for t, d in zip(toks, c.logprobs, strict=True)]
                      if c.logprobs and self.processed_logprobs else [])
                text_ids = toks if truncated else toks[:-1]
                seqs.append(Sequence(
                    prompt_ids=torch.tensor(ids), completion_ids=torch.tensor(toks, dtype=torch.long),
                    text=self.tokenizer.decode(text_ids, skip_special_tokens=True), truncated=truncated,
                    prompt_index=j, rollout_logp=torch.tensor(lp, dtype=torch.float32) if lp else None))
        return seqs


def make_generator(cfg: Any, policy, tokenizer, autocast_fn, device: torch.device, log=None) -> Generator:
    """The configured backend, or ``generate`` with a message where vLLM cannot run here."""
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    hf = HFGenerator(policy, tokenizer, cfg.max_completion_length, cfg.top_p, cfg.max_prompt_length, autocast_fn)
    if cfg.generation_backend == "generate":
        return hf
    if not vllm_available():
        say("generation_backend=vllm: vLLM is not installed (pip install '.[vllm]' on a CUDA machine); "
            "generating with model.generate")
        return hf
    if device.type != "cuda":
        say("generation_backend=vllm needs a CUDA device; generating with model.generate")
        return hf
    return VLLMColocate(policy, tokenizer, cfg.max_completion_length, cfg.top_p, cfg.max_prompt_length,
                        cfg.vllm_gpu_memory_utilization, cfg.vllm_sleep, cfg.seed)
