#!/usr/bin/python3
"""An independent replay of GPT-OSS (transformers' GptOssForCausalLM, eager, v4.55 to v4.57) in
float64 numpy, on a tiny checkpoint this script writes itself.

    gpt_oss_reference.py OUT_DIR [SEED] [--mxfp4] [--gguf]

writes OUT_DIR/config.json and OUT_DIR/model.safetensors (F32, the experts in GPT-OSS's own fused
layout: gate_up_proj [experts, hidden, 2 x intermediate] with gate and up interleaved, down_proj
[experts, intermediate, hidden]; with --mxfp4 the published checkpoints' form instead: those
matrices as MXFP4 `*_blocks` [experts, rows, cols / 32, 16] and `*_scales` [experts, rows, cols / 32]
of U8 over their [out, in] rows, and quantization_config); with --gguf also OUT_DIR/model.gguf, the
same model as llama.cpp's converter (conversion/gpt_oss.py) writes it: arch "gpt-oss", gate and up
the even and odd rows of gate_up_proj, every bias, norm, sink and the router F32, the experts F32 or
(with --mxfp4) ggml MXFP4 blocks; and OUT_DIR/reference.json: the tokens,
the logits of every
position, and what makes the check a check (how many gate/up values the clamp cut, how much
probability the sinks took, the smallest top-k routing margin, and the logits' change when the
sinks or the clamp are left out).

Written from the model's equations (modeling_gpt_oss.py and _compute_yarn_parameters), not from
kvparity's code, so that tests/test_gpt_oss.cpp checks kvparity's loader and forward pass against
an implementation that shares nothing with them but the facts.
"""
import json
import math
import sys
from pathlib import Path

import numpy as np

from replay_files import Gguf, write_safetensors

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 64, 32, 4, 4, 2, 16
VOCAB, EXPERTS, TOP_K, WINDOW = 128, 4, 2, 4
THETA, EPS, LIMIT, ALPHA = 150000.0, 1e-5, 7.0, 1.702
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 64}
MAX_POS = 64 * 32  # so that max_position_embeddings / original equals the factor
LAYER_TYPES = ["sliding_attention" if (l + 1) % 2 else "full_attention" for l in range(LAYERS)]


FP4_LEVELS = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4(rng, experts, rows, cols, exponents):
    """Random MXFP4 matrices [experts, rows, cols] as Hugging Face stores them, and their values.

    A 32-weight group's codes sit two to a byte, weight 2b in the low nibble of byte b, weight
    2b + 1 in the high one; the group's U8 scale s stands for 2^(s - 127).
    """
    codes = rng.integers(0, 16, (experts, rows, cols))
    scales = rng.choice(exponents, (experts, rows, cols // 32))
    values = FP4_LEVELS[codes] * np.exp2(np.repeat(scales, 32, axis=2).astype(np.float64) - 127)
    pairs = codes.reshape(experts, rows, cols // 32, 16, 2)
    blocks = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    return blocks, scales.astype(np.uint8), values


def weights(rng, packed=None):
    w = {"model.embed_tokens.weight": rng.normal(0, 1, (VOCAB, HIDDEN)),
         "model.norm.weight": 1 + 0.1 * rng.normal(0, 1, HIDDEN),
         "lm_head.weight": rng.normal(0, HIDDEN ** -0.5, (VOCAB, HIDDEN))}
    s = HIDDEN ** -0.5
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.normal(0, 1, HIDDEN)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.normal(0, 1, HIDDEN)
        for name, rows in (("q", HEADS * HEAD_DIM), ("k", KV_HEADS * HEAD_DIM), ("v", KV_HEADS * HEAD_DIM)):
            w[p + f"self_attn.{name}_proj.weight"] = rng.normal(0, 2 * s, (rows, HIDDEN))
            w[p + f"self_attn.{name}_proj.bias"] = rng.normal(0, 0.5, rows)
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, (HEADS * HEAD_DIM) ** -0.5, (HIDDEN, HEADS * HEAD_DIM))
        w[p + "self_attn.o_proj.bias"] = rng.normal(0, 0.1, HIDDEN)
        # One head with a large sink, so the sinks take a visible share of every row's mass.
        w[p + "self_attn.sinks"] = rng.normal(0, 1, HEADS) + np.array([2.5, 0, 0, 0])
        w[p + "mlp.router.weight"] = rng.normal(0, 2 * s, (EXPERTS, HIDDEN))
        w[p + "mlp.router.bias"] = rng.normal(0, 0.5, EXPERTS)
        if packed is None:
            w[p + "mlp.experts.gate_up_proj"] = rng.normal(0, 2 * s, (EXPERTS, HIDDEN, 2 * INTER))
        else:  # the replay's matrices are the blocks' values, transposed as transformers dequantises them
            blocks, scales, v = mxfp4(rng, EXPERTS, 2 * INTER, HIDDEN, [123, 124, 125])
            packed[p + "mlp.experts.gate_up_proj_blocks"], packed[p + "mlp.experts.gate_up_proj_scales"] = blocks, scales
            w[p + "mlp.experts.gate_up_proj"] = v.transpose(0, 2, 1)
        # Wide biases, so that some gate/up values pass swiglu_limit and the clamp matters.
        w[p + "mlp.experts.gate_up_proj_bias"] = rng.normal(0, 3.0, (EXPERTS, 2 * INTER))
        if packed is None:
            w[p + "mlp.experts.down_proj"] = rng.normal(0, INTER ** -0.5 / 4, (EXPERTS, INTER, HIDDEN))
        else:
            blocks, scales, v = mxfp4(rng, EXPERTS, HIDDEN, INTER, [120, 121, 122])
            packed[p + "mlp.experts.down_proj_blocks"], packed[p + "mlp.experts.down_proj_scales"] = blocks, scales
            w[p + "mlp.experts.down_proj"] = v.transpose(0, 2, 1)
        w[p + "mlp.experts.down_proj_bias"] = rng.normal(0, 0.1, (EXPERTS, HIDDEN))
    # The file holds fp32: the replay runs on exactly the values kvparity reads.
    return {k: v.astype(np.float32) for k, v in w.items()}


def write_gguf(path, w, packed):
    """The model in llama.cpp's gpt-oss layout."""
    g = Gguf("gpt-oss")
    A = "gpt-oss."
    g.u32("general.file_type", 38 if packed is not None else 0)
    if packed is not None:
        g.u32("general.quantization_version", 2)
    for k, v in (("block_count", LAYERS), ("context_length", MAX_POS), ("embedding_length", HIDDEN),
                 ("feed_forward_length", INTER), ("attention.head_count", HEADS),
                 ("attention.head_count_kv", KV_HEADS), ("expert_count", EXPERTS), ("expert_used_count", TOP_K),
                 ("attention.key_length", HEAD_DIM), ("attention.value_length", HEAD_DIM),
                 ("attention.sliding_window", WINDOW), ("expert_feed_forward_length", INTER),
                 ("rope.scaling.original_context_length", YARN["original_max_position_embeddings"]),
                 ("vocab_size", VOCAB)):
        g.u32(A + k, v)
    g.f32(A + "rope.freq_base", THETA)
    g.f32(A + "attention.layer_norm_rms_epsilon", EPS)
    g.f32(A + "rope.scaling.factor", YARN["factor"])
    g.string(A + "rope.scaling.type", "yarn")
    g.string("tokenizer.ggml.model", "none")
    f32_tensor = g.f32_tensor

    def mxfp4_tensor(name, blocks, scales):  # HF blocks [E, rows, n, 16], scales [E, rows, n]
        lo, hi = blocks & 0x0F, blocks >> 4
        codes = np.stack([lo, hi], axis=-1).reshape(blocks.shape[:-1] + (32,))  # element 2b low, 2b + 1 high
        qs = codes[..., :16] | (codes[..., 16:] << 4)  # ggml: element j low, j + 16 high
        data = np.concatenate([scales[..., None], qs], axis=-1).astype(np.uint8)
        E, rows, n = scales.shape
        g.raw_tensor(name, [n * 32, rows, E], 39, data.tobytes())

    f32_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    f32_tensor("output_norm.weight", w["model.norm.weight"])
    f32_tensor("output.weight", w["lm_head.weight"])
    for l in range(LAYERS):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        for hf, gg in (("input_layernorm.weight", "attn_norm.weight"),
                       ("post_attention_layernorm.weight", "post_attention_norm.weight"),
                       ("self_attn.sinks", "attn_sinks.weight"), ("mlp.router.weight", "ffn_gate_inp.weight"),
                       ("mlp.router.bias", "ffn_gate_inp.bias")):
            f32_tensor(b + gg, w[p + hf])
        for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
            f32_tensor(b + gg + ".weight", w[p + f"self_attn.{hf}.weight"])
            f32_tensor(b + gg + ".bias", w[p + f"self_attn.{hf}.bias"])
        gub = w[p + "mlp.experts.gate_up_proj_bias"]
        f32_tensor(b + "ffn_gate_exps.bias", gub[..., 0::2])
        f32_tensor(b + "ffn_up_exps.bias", gub[..., 1::2])
        f32_tensor(b + "ffn_down_exps.bias", w[p + "mlp.experts.down_proj_bias"])
        if packed is None:
            gu = w[p + "mlp.experts.gate_up_proj"].transpose(0, 2, 1)  # [E, 2I, H]
            f32_tensor(b + "ffn_gate_exps.weight", gu[:, 0::2, :])
            f32_tensor(b + "ffn_up_exps.weight", gu[:, 1::2, :])
            f32_tensor(b + "ffn_down_exps.weight", w[p + "mlp.experts.down_proj"].transpose(0, 2, 1))
        else:
            blocks, scales = packed[p + "mlp.experts.gate_up_proj_blocks"], packed[p + "mlp.experts.gate_up_proj_scales"]
            mxfp4_tensor(b + "ffn_gate_exps.weight", blocks[:, 0::2], scales[:, 0::2])
            mxfp4_tensor(b + "ffn_up_exps.weight", blocks[:, 1::2], scales[:, 1::2])
            mxfp4_tensor(b + "ffn_down_exps.weight", packed[p + "mlp.experts.down_proj_blocks"],
                         packed[p + "mlp.experts.down_proj_scales"])
    g.write(path)


def yarn_inv_freq():
    """_compute_yarn_parameters, in float64: the ramp between the rotations beta_fast and beta_slow."""
    dim, base = HEAD_DIM, THETA
    original = YARN["original_max_position_embeddings"]
    factor = MAX_POS / original
    attention_factor = 0.1 * math.log(factor) + 1.0

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(YARN["beta_fast"]), correction_dim(YARN["beta_slow"])
    low, high = max(low, 0), min(high, dim - 1)  # truncate: false
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    pos_freqs = base ** (np.arange(0, dim, 2) / dim)
    inv = (1 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (1 / pos_freqs) * extrapolation_factor
    return inv, attention_factor


def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rope(x, cos, sin):  # x [T, heads, D]; cos/sin [T, D/2]
    h = HEAD_DIM // 2
    a, b = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def forward(w, tokens, sinks=True, clamp=True, stats=None):
    T = len(tokens)
    inv, af = yarn_inv_freq()
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(ang) * af, np.sin(ang) * af
    x = w["model.embed_tokens.weight"][tokens].astype(np.float64)
    group = HEADS // KV_HEADS
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        lin = lambda name, v: v @ w[p + name + ".weight"].T.astype(np.float64) + w[p + name + ".bias"]
        q = rope(lin("self_attn.q_proj", h).reshape(T, HEADS, HEAD_DIM), cos, sin)
        k = rope(lin("self_attn.k_proj", h).reshape(T, KV_HEADS, HEAD_DIM), cos, sin)
        v = lin("self_attn.v_proj", h).reshape(T, KV_HEADS, HEAD_DIM)
        window = WINDOW if LAYER_TYPES[l] == "sliding_attention" else None
        out = np.zeros((T, HEADS, HEAD_DIM))
        for hd in range(HEADS):
            kv = hd // group
            scores = q[:, hd, :] @ k[:, kv, :].T * HEAD_DIM ** -0.5
            i, j = np.arange(T)[:, None], np.arange(T)[None, :]
            visible = (j <= i) & ((i - j < window) if window else True)
            scores = np.where(visible, scores, -np.inf)
            sink = w[p + "self_attn.sinks"][hd] if sinks else -np.inf
            combined = np.concatenate([scores, np.full((T, 1), sink)], axis=1)
            combined -= combined.max(axis=1, keepdims=True)
            probs = np.exp(combined)
            probs /= probs.sum(axis=1, keepdims=True)
            if stats is not None and sinks:
                stats["sink_mass_max"] = max(stats.get("sink_mass_max", 0.0), float(probs[:, -1].max()))
            out[:, hd, :] = probs[:, :-1] @ v[:, kv, :]
        x = x + lin("self_attn.o_proj", out.reshape(T, HEADS * HEAD_DIM))
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        logits = h @ w[p + "mlp.router.weight"].T.astype(np.float64) + w[p + "mlp.router.bias"]
        order = np.argsort(-logits, axis=1, kind="stable")
        mlp = np.zeros_like(x)
        for t in range(T):
            top = order[t, :TOP_K]
            if stats is not None:
                margin = logits[t, top[-1]] - logits[t, order[t, TOP_K]]
                stats["min_routing_margin"] = min(stats.get("min_routing_margin", np.inf), float(margin))
            e_w = np.exp(logits[t, top] - logits[t, top[0]])
            e_w /= e_w.sum()
            for e, rw in zip(top, e_w):
                gu = h[t] @ w[p + "mlp.experts.gate_up_proj"][e] + w[p + "mlp.experts.gate_up_proj_bias"][e]
                gate, up = gu[0::2], gu[1::2]
                if stats is not None:
                    stats["clamped"] = stats.get("clamped", 0) + int((gate > LIMIT).sum() + (np.abs(up) > LIMIT).sum())
                if clamp:
                    gate, up = np.minimum(gate, LIMIT), np.clip(up, -LIMIT, LIMIT)
                glu = gate / (1 + np.exp(-gate * ALPHA))
                y = ((up + 1) * glu) @ w[p + "mlp.experts.down_proj"][e] + w[p + "mlp.experts.down_proj_bias"][e]
                mlp[t] += rw * y
        x = x + mlp
    x = rms_norm(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].T.astype(np.float64)


def main():
    args = [a for a in sys.argv[1:] if a not in ("--mxfp4", "--gguf")]
    packed = {} if "--mxfp4" in sys.argv else None
    out = Path(args[0])
    seed = int(args[1]) if len(args) > 1 else 7
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = weights(rng, packed)
    config = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB, "max_position_embeddings": MAX_POS, "rope_theta": THETA, "rms_norm_eps": EPS,
        "rope_scaling": YARN, "sliding_window": WINDOW, "layer_types": LAYER_TYPES,
        "num_local_experts": EXPERTS, "num_experts_per_tok": TOP_K, "experts_per_token": TOP_K,
        "swiglu_limit": LIMIT, "attention_bias": True, "tie_word_embeddings": False, "hidden_act": "silu",
        "router_aux_loss_coef": 0.9, "output_router_logits": False, "eos_token_id": 2, "pad_token_id": 1,
        "torch_dtype": "float32", "use_cache": True,
    }
    if packed is not None:
        config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    stored = dict(w)
    if packed is not None:
        for name in list(stored):
            if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                del stored[name]
        stored.update(packed)
    write_safetensors(out / "model.safetensors", stored)
    if "--gguf" in sys.argv:
        write_gguf(out / "model.gguf", w, packed)
    tokens = [int(t) for t in rng.integers(3, VOCAB, 14)]
    stats = {}
    logits = forward(w, tokens, stats=stats)
    stats["no_sinks_change"] = float(np.abs(forward(w, tokens, sinks=False) - logits).max())
    stats["no_clamp_change"] = float(np.abs(forward(w, tokens, clamp=False) - logits).max())
    (out / "reference.json").write_text(json.dumps({"tokens": tokens, "vocab": VOCAB, "stats": stats,
                                                    "logits": [float(v) for v in logits.reshape(-1)]}))


if __name__ == "__main__":
    main()
