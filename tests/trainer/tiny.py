"""A tiny random-init Llama and a character-level tokenizer with a chat template, built locally."""

from __future__ import annotations

import string
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<pad>", "<|im_start|>", "<|im_end|>"]


def make_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = list(string.digits + string.ascii_letters + " \n.,?!:;'\"()[]{}+-*/=<>_#`\\|%&^~@$")
    vocab = {t: i for i, t in enumerate(SPECIALS + ["<unk>"] + chars)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<|im_end|>", unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def make_model(vocab_size: int, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        tie_word_embeddings=True, pad_token_id=0, eos_token_id=2, bos_token_id=1,
    )
    return LlamaForCausalLM(cfg)


def save_tiny(dirpath: str | Path, seed: int = 0) -> Path:
    d = Path(dirpath)
    d.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer()
    model = make_model(len(tok), seed)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def digit_reward(items):
    """Graded fake reward: share of digit characters in the completion (gives groups variance)."""
    out = []
    for it in items:
        c = it["completion"]
        out.append({"id": it["id"], "reward": sum(ch.isdigit() for ch in c) / max(len(c), 1) * 3, "status": "ok",
                    "detail": {}})
    return out
