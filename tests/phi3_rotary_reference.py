#!/usr/bin/python3
"""An independent replay of Phi-3's rotary embedding as transformers runs it (Phi3ForCausalLM,
eager: a partial rotary factor and LongRoPE, as in Phi-4-mini and the 128k Phi-3 models), in
float64 numpy, on a tiny checkpoint this script writes itself.

    phi3_rotary_reference.py OUT_DIR [SEED] [--gguf]

writes OUT_DIR/config.json and OUT_DIR/model.safetensors (F32, Phi3ForCausalLM's fused qkv_proj and
gate_up_proj); with --gguf also OUT_DIR/model.gguf, the same model as llama.cpp's converter
(Phi3MiniModel) writes it: arch "phi3", attn_qkv and ffn_up fused as in the checkpoint,
rope.dimension_count the rotated dimensions, the factors as F32 tensors rope_factors_short.weight and
rope_factors_long.weight, rope.scaling.attn_factor its sqrt(1 + ln(s) / ln(original)) and
rope.scaling.original_context_length; and OUT_DIR/reference.json: the tokens, and three sets of
logits:
  logits          one cache-free call over every token (all positions), as `forward` computes;
  cached_steps    the last row of each call of cached generation: a prefill of PREFILL tokens,
                  then one token a call, each call rotating only its own rows and attending to the
                  keys the earlier calls cached (rotated as those calls chose);
  uncached_steps  the last row of a cache-free call over tokens[:t + 1], for the same t.
transformers' dynamic_rope_update picks the long factors in a call whose highest position + 1
exceeds original_max_position_embeddings (ORIG), for all of that call's rows: from t = ORIG on the
cached keys of positions < ORIG stay rotated by the short factors while the cache-free call
rotates them again by the long ones, so the two paths differ by construction, not by rounding.

Written from the model's equations (modeling_phi3.py, _compute_longrope_parameters,
dynamic_rope_update), not from kvparity's code, so that tests/test_phi3_rotary.cpp checks
kvparity's loader and forward pass against an implementation that shares nothing with them.
"""
import json
import math
import sys
from pathlib import Path

import numpy as np

from replay_files import Gguf, write_safetensors

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS = 64, 48, 3, 4, 2
HEAD_DIM = HIDDEN // HEADS
PARTIAL = 0.75
ROT = int(HEAD_DIM * PARTIAL)  # 12 of 16 dimensions rotate
VOCAB, THETA, EPS = 128, 10000.0, 1e-5
MAX_POS, ORIG = 64, 8  # factor 8: attention factor sqrt(1 + ln 8 / ln 8) = sqrt(2)
N_TOKENS, PREFILL = 14, 5


def write_gguf(path, w, short, long):
    """The model in llama.cpp's phi3 layout (its converter's Phi3MiniModel)."""
    g = Gguf("phi3")
    A = "phi3."
    g.u32("general.file_type", 0)
    for k, v in (("context_length", MAX_POS), ("rope.scaling.original_context_length", ORIG),
                 ("embedding_length", HIDDEN), ("feed_forward_length", INTER), ("block_count", LAYERS),
                 ("attention.head_count", HEADS), ("attention.head_count_kv", KV_HEADS),
                 ("rope.dimension_count", ROT), ("attention.sliding_window", 0)):
        g.u32(A + k, v)
    g.f32(A + "attention.layer_norm_rms_epsilon", EPS)
    g.f32(A + "rope.freq_base", THETA)
    scale = MAX_POS / ORIG
    g.f32(A + "rope.scaling.attn_factor", math.sqrt(1 + math.log(scale) / math.log(ORIG)) if scale > 1 else 1.0)
    g.string("tokenizer.ggml.model", "none")
    g.f32_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    g.f32_tensor("output_norm.weight", w["model.norm.weight"])
    g.f32_tensor("output.weight", w["lm_head.weight"])
    g.f32_tensor("rope_factors_long.weight", np.array(long))
    g.f32_tensor("rope_factors_short.weight", np.array(short))
    for l in range(LAYERS):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        for hf, gg in (("input_layernorm", "attn_norm"), ("self_attn.qkv_proj", "attn_qkv"),
                       ("self_attn.o_proj", "attn_output"), ("post_attention_layernorm", "ffn_norm"),
                       ("mlp.gate_up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")):
            g.f32_tensor(b + gg + ".weight", w[p + hf + ".weight"])
    g.write(path)


def weights(rng):
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # the values the file holds
    w = {"model.embed_tokens.weight": f32(rng.normal(0, 1, (VOCAB, HIDDEN))),
         "model.norm.weight": f32(1 + 0.1 * rng.normal(0, 1, HIDDEN)),
         "lm_head.weight": f32(rng.normal(0, 1, (VOCAB, HIDDEN)) / math.sqrt(HIDDEN))}
    qkv_rows = (HEADS + 2 * KV_HEADS) * HEAD_DIM
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = f32(1 + 0.1 * rng.normal(0, 1, HIDDEN))
        w[p + "post_attention_layernorm.weight"] = f32(1 + 0.1 * rng.normal(0, 1, HIDDEN))
        w[p + "self_attn.qkv_proj.weight"] = f32(rng.normal(0, 1, (qkv_rows, HIDDEN)) / math.sqrt(HIDDEN) * 2)
        w[p + "self_attn.o_proj.weight"] = f32(rng.normal(0, 1, (HIDDEN, HEADS * HEAD_DIM)) / math.sqrt(HIDDEN))
        w[p + "mlp.gate_up_proj.weight"] = f32(rng.normal(0, 1, (2 * INTER, HIDDEN)) / math.sqrt(HIDDEN))
        w[p + "mlp.down_proj.weight"] = f32(rng.normal(0, 1, (HIDDEN, INTER)) / math.sqrt(INTER))
    return w


def inv_freq(ext):
    return 1.0 / (np.asarray(ext, dtype=np.float64) * THETA ** (np.arange(0, ROT, 2) / ROT))


def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rotate(x, positions, freqs, af):  # x [T, heads, HEAD_DIM]: the first ROT dims rotate
    ang = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :]
    c, s = (np.cos(ang) * af)[:, None, :], (np.sin(ang) * af)[:, None, :]
    h = ROT // 2
    a, b, rest = x[..., :h], x[..., h:ROT], x[..., ROT:]
    return np.concatenate([a * c - b * s, b * c + a * s, rest], axis=-1)


class Rope:
    def __init__(self, short, long, switch=True, attention=True):
        self.short, self.long, self.switch = inv_freq(short), inv_freq(long), switch
        factor = MAX_POS / ORIG
        self.af = math.sqrt(1 + math.log(factor) / math.log(ORIG)) if attention else 1.0

    def freqs(self, positions):  # dynamic_rope_update: max(position_ids) + 1 > ORIG
        return self.long if self.switch and max(positions) + 1 > ORIG else self.short


def call(w, rope, tokens, positions, cache):
    """One forward call over `tokens` at `positions`; cache: per layer (K, V) of earlier calls,
    extended in place. Returns the logits of every row."""
    T = len(tokens)
    freqs = rope.freqs(positions)
    x = w["model.embed_tokens.weight"][tokens]
    group = HEADS // KV_HEADS
    q_rows, kv_rows = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
        q = rotate(qkv[:, :q_rows].reshape(T, HEADS, HEAD_DIM), positions, freqs, rope.af)
        k = rotate(qkv[:, q_rows:q_rows + kv_rows].reshape(T, KV_HEADS, HEAD_DIM), positions, freqs, rope.af)
        v = qkv[:, q_rows + kv_rows:].reshape(T, KV_HEADS, HEAD_DIM)
        pk, pv = cache[l]
        k_all, v_all = np.concatenate([pk, k]), np.concatenate([pv, v])
        cache[l] = (k_all, v_all)
        key_pos = np.arange(len(k_all))
        out = np.zeros((T, HEADS, HEAD_DIM))
        for hd in range(HEADS):
            kv = hd // group
            scores = q[:, hd, :] @ k_all[:, kv, :].T * HEAD_DIM ** -0.5
            scores = np.where(key_pos[None, :] <= np.asarray(positions)[:, None], scores, -np.inf)
            scores -= scores.max(axis=1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=1, keepdims=True)
            out[:, hd, :] = probs @ v_all[:, kv, :]
        x = x + out.reshape(T, q_rows) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        gu = h @ w[p + "mlp.gate_up_proj.weight"].T
        gate, up = gu[:, :INTER], gu[:, INTER:]
        x = x + (up * (gate / (1 + np.exp(-gate)))) @ w[p + "mlp.down_proj.weight"].T
    return rms_norm(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


def empty_cache():
    return [(np.zeros((0, KV_HEADS, HEAD_DIM)), np.zeros((0, KV_HEADS, HEAD_DIM))) for _ in range(LAYERS)]


def uncached(w, rope, tokens):
    return call(w, rope, tokens, list(range(len(tokens))), empty_cache())


def cached_steps(w, rope, tokens):
    cache = empty_cache()
    rows = [call(w, rope, tokens[:PREFILL], list(range(PREFILL)), cache)[-1]]
    for t in range(PREFILL, len(tokens)):
        rows.append(call(w, rope, tokens[t:t + 1], [t], cache)[-1])
    return np.array(rows)


def uncached_steps(w, rope, tokens):
    return np.array([uncached(w, rope, tokens[:t + 1])[-1] for t in range(PREFILL - 1, len(tokens))])


def main():
    args = [a for a in sys.argv[1:] if a != "--gguf"]
    out = Path(args[0])
    seed = int(args[1]) if len(args) > 1 else 11
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = weights(rng)
    # Factors as Phi-3's: about 1 for the fast frequencies, larger for the slow ones.
    short = [float(np.float32(v)) for v in 1 + np.sort(rng.uniform(0, 0.5, ROT // 2))]
    long = [float(np.float32(v)) for v in 1 + np.sort(rng.uniform(0, 6, ROT // 2))]
    config = {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB,
        "max_position_embeddings": MAX_POS, "original_max_position_embeddings": ORIG,
        "partial_rotary_factor": PARTIAL, "rope_theta": THETA, "rms_norm_eps": EPS,
        "rope_scaling": {"type": "longrope", "short_factor": short, "long_factor": long},
        "sliding_window": None, "tie_word_embeddings": False, "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "torch_dtype": "float32", "use_cache": True,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(out / "model.safetensors", w)
    if "--gguf" in sys.argv:
        write_gguf(out / "model.gguf", w, short, long)
    tokens = [int(t) for t in rng.integers(3, VOCAB, N_TOKENS)]
    rope = Rope(short, long)
    logits = uncached(w, rope, tokens)
    on, off = cached_steps(w, rope, tokens), uncached_steps(w, rope, tokens)
    first_long = ORIG - (PREFILL - 1)  # the index of step t = ORIG
    stats = {
        "attention_factor": rope.af,
        "paths_before_switch": float(np.abs(on[:first_long] - off[:first_long]).max()),
        "paths_after_switch": float(np.abs(on[first_long:] - off[first_long:]).max()),
        "never_switching_change": float(np.abs(uncached(w, Rope(short, long, switch=False), tokens) - logits).max()),
        "no_attention_factor_change": float(np.abs(uncached(w, Rope(short, long, attention=False), tokens) -
                                                   logits).max()),
    }
    flat = lambda a: [float(v) for v in a.reshape(-1)]
    (out / "reference.json").write_text(json.dumps({
        "tokens": tokens, "vocab": VOCAB, "prefill": PREFILL, "original_max_position_embeddings": ORIG,
        "stats": stats, "logits": flat(logits), "cached_steps": flat(on), "uncached_steps": flat(off)}))


if __name__ == "__main__":
    main()
