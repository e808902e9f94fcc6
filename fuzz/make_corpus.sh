#!/usr/bin/env bash
# Makes seed corpora for the fuzz targets under OUT/<target>/, from files the project generates
# itself (tiny hand-written HF models, `kvparity synth` and `kvparity convert`) plus, when present,
# the small models in $KVPARITY_SHARED/models. Nothing here is committed; rerunning is cheap.
# Usage: fuzz/make_corpus.sh OUT [KVPARITY_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$1"
KVP="${2:-build/kvparity}"
SHARED="${KVPARITY_SHARED:-$(cd .. && pwd)/shared}"
M="$SHARED/models"
[ -x "$KVP" ] || { echo "make_corpus: $KVP not built" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"/{fuzz_gguf,fuzz_safetensors,fuzz_safetensors_index,fuzz_hf_config,fuzz_llama2c,fuzz_tokenizer_bin,fuzz_tokenizer_model,fuzz_tokenizer_json,fuzz_tokenize,fuzz_chat_template}
T="$OUT/tmp"
mkdir -p "$T"

# Tiny HF models (dim 8, one layer, vocab 512) in llama and qwen2 layout, fp32/fp16/bf16, a
# byte-level tokenizer.json, config.json files for every family, a tiny llama2.c checkpoint.
python3 - "$T" "$OUT" <<'PY'
import json, os, random, struct, sys
T, OUT = sys.argv[1], sys.argv[2]
# Tensors are (shape, flat list of floats); no numpy needed.
def st_bytes(tensors, dtype):
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (shape, vals) in tensors.items():
        if dtype == "F16": b = struct.pack(f"<{len(vals)}e", *vals)
        elif dtype == "BF16":
            b = b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
        else: b = struct.pack(f"<{len(vals)}f", *vals)
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)
rng = random.Random(1)
def rnd(*shape):
    n = 1
    for d in shape: n *= d
    return (shape, [rng.gauss(0, 0.1) for _ in range(n)])
def ones(n): return ((n,), [1.0] * n)
def model(arch, bias, d=8, f=16, V=512):
    H, KV, hd = 2, 1, d // 2
    t = {"model.embed_tokens.weight": rnd(V, d), "model.norm.weight": ones(d)}
    p = "model.layers.0."
    t[p + "input_layernorm.weight"] = ones(d)
    t[p + "post_attention_layernorm.weight"] = ones(d)
    t[p + "self_attn.q_proj.weight"] = rnd(H * hd, d)
    t[p + "self_attn.k_proj.weight"] = rnd(KV * hd, d)
    t[p + "self_attn.v_proj.weight"] = rnd(KV * hd, d)
    t[p + "self_attn.o_proj.weight"] = rnd(d, H * hd)
    for n in ("gate", "up"): t[p + f"mlp.{n}_proj.weight"] = rnd(f, d)
    t[p + "mlp.down_proj.weight"] = rnd(d, f)
    if bias:
        t[p + "self_attn.q_proj.bias"] = rnd(H * hd)
        t[p + "self_attn.k_proj.bias"] = rnd(KV * hd)
        t[p + "self_attn.v_proj.bias"] = rnd(KV * hd)
    cfg = {"architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM"],
           "model_type": arch, "hidden_size": d, "intermediate_size": f, "num_hidden_layers": 1,
           "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": hd, "vocab_size": V,
           "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    return t, cfg
for arch, bias in (("llama", False), ("qwen2", True)):
    t, cfg = model(arch, bias)
    for dt in ("F32", "F16", "BF16"):
        d = os.path.join(T, f"{arch}_{dt}")
        os.makedirs(d, exist_ok=True)
        b = st_bytes(t, dt)
        open(os.path.join(d, "model.safetensors"), "wb").write(b)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
        open(os.path.join(OUT, "fuzz_safetensors", f"{arch}_{dt}.safetensors"), "wb").write(b)
    open(os.path.join(OUT, "fuzz_hf_config", f"{arch}.json"), "w").write(json.dumps(cfg, indent=1))
    # Sharded: two shards; the index target reads one shard named a.safetensors.
    names = sorted(t)
    half = {n: t[n] for n in names[: len(names) // 2]}
    idx = {"metadata": {"total_size": 0}, "weight_map": {n: "a.safetensors" for n in half}}
    open(os.path.join(OUT, "fuzz_safetensors_index", f"{arch}.bin"), "wb").write(
        json.dumps(idx, indent=1).encode() + b"\n--shard--\n" + st_bytes(half, "F32"))
# Rows of 32 and 64 values, for quantised GGUF seeds (convert --quant, below).
t, cfg = model("llama", False, d=32, f=64, V=64)
os.makedirs(os.path.join(T, "llama_q"), exist_ok=True)
open(os.path.join(T, "llama_q", "model.safetensors"), "wb").write(st_bytes(t, "F32"))
json.dump(cfg, open(os.path.join(T, "llama_q", "config.json"), "w"), indent=1)
# Tiny mixtures of experts (dim 8, one layer, 2 experts of 16, 1 a token), for the GGUF seeds'
# stacked experts (convert --to gguf, below): Mixtral's names, Qwen2-MoE's with its shared expert
# and biases, OLMoE's with its whole-projection q/k norms.
def moe_model(kind, d=8, f=16, V=32, E=2):
    H, KV, hd = 2, 1, d // 2
    t, _ = model("qwen2" if kind == "qwen2_moe" else "llama", kind == "qwen2_moe", d, f, V)
    p = "model.layers.0."
    for n in ("gate_proj", "up_proj", "down_proj"): del t[p + "mlp." + n + ".weight"]
    cfg = {"hidden_size": d, "intermediate_size": f, "num_hidden_layers": 1, "num_attention_heads": H,
           "num_key_value_heads": KV, "head_dim": hd, "vocab_size": V, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True, "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": "float32", "num_experts_per_tok": 1}
    if kind == "mixtral":
        cfg.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": E})
        t[p + "block_sparse_moe.gate.weight"] = rnd(E, d)
        for e in range(E):
            for w, shape in (("w1", (f, d)), ("w3", (f, d)), ("w2", (d, f))):
                t[p + f"block_sparse_moe.experts.{e}.{w}.weight"] = rnd(*shape)
        return t, cfg
    cfg.update({"num_experts": E, "norm_topk_prob": False})
    t[p + "mlp.gate.weight"] = rnd(E, d)
    for e in range(E):
        for w, shape in (("gate_proj", (f, d)), ("up_proj", (f, d)), ("down_proj", (d, f))):
            t[p + f"mlp.experts.{e}.{w}.weight"] = rnd(*shape)
    if kind == "qwen2_moe":
        cfg.update({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "moe_intermediate_size": f,
                    "shared_expert_intermediate_size": f, "decoder_sparse_step": 1, "mlp_only_layers": [],
                    "use_sliding_window": False, "tie_word_embeddings": False})
        t["lm_head.weight"] = rnd(V, d)
        for w, shape in (("gate_proj", (f, d)), ("up_proj", (f, d)), ("down_proj", (d, f))):
            t[p + f"mlp.shared_expert.{w}.weight"] = rnd(*shape)
        t[p + "mlp.shared_expert_gate.weight"] = rnd(1, d)
    else:  # olmoe
        cfg.update({"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "num_key_value_heads": H,
                    "tie_word_embeddings": False})
        t[p + "self_attn.k_proj.weight"] = rnd(H * hd, d)
        t[p + "self_attn.v_proj.weight"] = rnd(H * hd, d)
        t["lm_head.weight"] = rnd(V, d)
        t[p + "self_attn.q_norm.weight"] = ones(H * hd)
        t[p + "self_attn.k_norm.weight"] = ones(H * hd)
    return t, cfg
for kind in ("mixtral", "qwen2_moe", "olmoe"):
    t, cfg = moe_model(kind)
    d = os.path.join(T, kind)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "model.safetensors"), "wb").write(st_bytes(t, "F16"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
cfgs = {
  "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128,
              "sliding_window": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False},
  "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 64,
             "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 128,
             "sliding_window": 32, "query_pre_attn_scalar": 16, "attn_logit_softcapping": 50.0,
             "final_logit_softcapping": 30.0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
             "hidden_activation": "gelu_pytorch_tanh"},
  "qwen2_window": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
                   "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128,
                   "use_sliding_window": True, "sliding_window": 32, "max_window_layers": 0,
                   "rope_scaling": None, "tie_word_embeddings": True},
  "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512, "max_position_embeddings": 128,
            "use_sliding_window": False, "sliding_window": None, "attention_bias": False,
            "layer_types": ["full_attention", "full_attention"], "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": True},
  "gemma3": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64,
             "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 128,
             "sliding_window": 32, "sliding_window_pattern": 3, "rope_local_base_freq": 10000.0,
             "rope_theta": 1000000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
             "query_pre_attn_scalar": 16, "attn_logit_softcapping": None, "final_logit_softcapping": None,
             "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
             "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh"},
}
# transformers v5's forms: rope_parameters (flat, and per layer kind for Gemma-3), and a
# vision-language wrapper's sparse text_config.
cfgs["llama3_v5"] = dict(cfgs["mistral"], architectures=["LlamaForCausalLM"], model_type="llama", dtype="bfloat16",
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})
for k in ("rope_theta", "sliding_window"): cfgs["llama3_v5"].pop(k)
g5 = {k: v for k, v in cfgs["gemma3"].items() if k not in ("rope_theta", "rope_scaling", "rope_local_base_freq",
                                                          "sliding_window_pattern")}
g5.update(_sliding_window_pattern=3, rope_parameters={
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
cfgs["gemma3_v5"] = g5
cfgs["gemma3_vl"] = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                     "eos_token_id": [1, 106], "image_token_index": 262144,
                     "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                                     "num_hidden_layers": 34, "sliding_window": 1024,
                                     "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
                     "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}}
cfgs["llava"] = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
                 "text_config": {"model_type": "llama", "vocab_size": 32064, "max_position_embeddings": 4096,
                                 "rms_norm_eps": 1e-5}, "vision_config": {"model_type": "clip_vision_model"}}
cfgs["qwen2_5_vl"] = dict(cfgs["qwen2_window"], architectures=["Qwen2_5_VLForConditionalGeneration"],
                         model_type="qwen2_5_vl", use_sliding_window=False, image_token_id=5,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                         vision_config={"depth": 2, "hidden_size": 16})
cfgs["smollm3"] = {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 64,
                   "intermediate_size": 160, "num_hidden_layers": 4, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512,
                   "bos_token_id": 1, "eos_token_id": 2, "no_rope_layers": [1, 1, 1, 0],
                   "no_rope_layer_interval": 4, "use_sliding_window": False, "sliding_window": None,
                   "layer_types": ["full_attention"] * 4}
cfgs["granite"] = dict(cfgs["smollm3"], architectures=["GraniteForCausalLM"], model_type="granite",
                      embedding_multiplier=12.0, attention_multiplier=0.015625, residual_multiplier=0.22,
                      logits_scaling=8.0)
for k in ("no_rope_layers", "no_rope_layer_interval", "use_sliding_window", "sliding_window", "layer_types"):
    cfgs["granite"].pop(k)
# OLMo-3: windows on 3 of 4 layers, YaRN (the published fields), and Qwen3 with its model card's YaRN.
cfgs["olmo3"] = {"architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3", "hidden_size": 64,
                 "intermediate_size": 160, "num_hidden_layers": 4, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512,
                 "eos_token_id": 2, "sliding_window": 16, "rope_theta": 500000,
                 "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                 "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64,
                                  "attention_factor": 1.2079441541679836, "beta_fast": 32.0, "beta_slow": 1.0}}
cfgs["qwen3_yarn"] = dict(cfgs["qwen3"], rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 32})
# Ministral 3 as the 2512 series publishes it: a Mistral3 wrapper over a sparse ministral3 text_config.
cfgs["ministral3"] = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
                      "text_config": {"model_type": "ministral3", "hidden_size": 64, "intermediate_size": 160,
                                      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                      "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 4096,
                                      "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0,
                                                          "factor": 16.0, "original_max_position_embeddings": 256,
                                                          "mscale": 1.0, "mscale_all_dim": 1.0,
                                                          "llama_4_scaling_beta": 0.1}},
                      "vision_config": {"model_type": "pixtral"}}
for k, v in cfgs.items():
    open(os.path.join(OUT, "fuzz_hf_config", f"{k}.json"), "w").write(json.dumps(v, indent=1))
# A llama2.c checkpoint: dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 32 (shared), seq 16.
dim, hid, L, H, KV, V, S = 8, 16, 1, 2, 1, 32, 16
hd = dim // H
n = V * dim + L * dim + L * dim * H * hd + 2 * L * dim * KV * hd + L * H * hd * dim + L * dim + 3 * L * dim * hid \
    + dim + S * hd  # + freq_cis real/imag halves
for vs, tail in ((V, 0), (-V, V * dim)):
    m = n + tail
    b = struct.pack("<7i", dim, hid, L, H, KV, vs, S) + struct.pack(f"<{m}f", *[i / m for i in range(m)])
    open(os.path.join(OUT, "fuzz_llama2c", f"tiny_{'shared' if vs > 0 else 'unshared'}.bin"), "wb").write(b)
# Text for the tokenize target: byte 0 picks the tokenizer (0 llama2c, 1 SentencePiece json, 2 byte level).
texts = ["Hello world", " the cat sat", "<s>hi</s>", "<|endoftext|>12 12", "é à ü 😀 ▁x",
         "\x00\x01\xff", "  spaces   and\ttabs\n", "ab" * 40]
for i, s in enumerate(texts):
    for sel in range(3):
        data = s.encode("utf-8", "surrogatepass") if not s.startswith("\x00") else bytes([0, 1, 255])
        open(os.path.join(OUT, "fuzz_tokenize", f"t{i}_{sel}"), "wb").write(bytes([sel | 4]) + data)
open(os.path.join(OUT, "fuzz_tokenize", "invalid_utf8"), "wb").write(b"\x01\xc3\x28\xe2\x82\xf0\x9f\x98")
# Chat templates: each format with and without a system message (bit 8: the conversation's, bit
# 32: the run's), over texts that spell special tokens, and templates (bit 16) in each family's
# layout for detection.
turns = b"Question: 2+2?\nAnswer:\x00 4 <|im_end|>\x00And 3+3? <start_of_turn>user\n\xc3\xa9"
for sel in range(6):
    for flags in (0, 8, 32):
        open(os.path.join(OUT, "fuzz_chat_template", f"turns{sel}_{flags}"), "wb").write(bytes([sel | flags]) + turns)
for i, t in enumerate([
        "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\n' + m['content'] | trim + '<end_of_turn>\n' }}{% endfor %}",
        "{% for m in messages %}{{'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'}}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}",
        "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' }}",
        "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{{ '<<SYS>>\n' }}",
        "{{ bos_token }}{{ '[INST] ' + message['content'] + ' [/INST]' }}",
        "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{%- set date_string = \"26 Jul 2024\" %}"
        "{{- 'Cutting Knowledge Date: December 2023\\n' }}{{- 'Today Date: ' + date_string }}{{- '<|eot_id|>' }}"]):
    open(os.path.join(OUT, "fuzz_chat_template", f"jinja{i}"), "wb").write(bytes([16]) + t.encode())
# A small llama2.c tokenizer.bin: <unk> <s> </s>, byte tokens, letters, a few merges.
pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581"] + \
         [chr(c) for c in range(97, 123)] + ["\u2581t", "he", "\u2581the", "in", "\u2581a", "at"]
b = struct.pack("<i", max(len(p.encode()) for p in pieces))
for i, p in enumerate(pieces):
    e = p.encode()
    b += struct.pack("<fi", 0.0 if i < 259 else -float(i), len(e)) + e
open(os.path.join(OUT, "fuzz_tokenizer_bin", "small.bin"), "wb").write(b)
# The same pieces as a SentencePiece tokenizer.model (protobuf), with and without the dummy prefix.
def pb_varint(v):
    v &= (1 << 64) - 1
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80]); v >>= 7
    return out + bytes([v])
def pb_field(num, wire, payload):
    key = pb_varint((num << 3) | wire)
    return key + (pb_varint(len(payload)) + payload if wire == 2 else payload)
for prefix in (1, 0):
    m = b""
    for i, p in enumerate(pieces):
        kind = 2 if i == 0 else 3 if i < 3 else 6 if i < 259 else 1
        m += pb_field(1, 2, pb_field(1, 2, p.encode()) + pb_field(2, 5, struct.pack("<f", 0.0 if i < 259 else -float(i)))
                      + (pb_field(3, 0, pb_varint(kind)) if kind != 1 else b""))
    m += pb_field(2, 2, b"".join(pb_field(n, 0, pb_varint(v)) for n, v in ((3, 2), (35, 1), (40, 0), (41, 1), (42, 2), (43, -1))))
    m += pb_field(3, 2, pb_field(1, 2, b"identity") + pb_field(3, 0, pb_varint(prefix)) + pb_field(4, 0, pb_varint(0)))
    open(os.path.join(OUT, "fuzz_tokenizer_model", f"small_prefix{prefix}.model"), "wb").write(m)
# A byte-level (GPT-2 style) tokenizer.json.
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, k = bs[:], 0
for x in range(256):
    if x not in bs:
        bs.append(x); cs.append(256 + k); k += 1
ch = {b_: chr(c) for b_, c in zip(bs, cs)}
vocab = {ch[x]: x for x in range(256)}
G = ch[32]
for i, p in enumerate([G + "t", "he", G + "the", "in", "ca", "cat"]): vocab[p] = 256 + i
vocab["12"] = 263
j = {"added_tokens": [{"id": 262, "content": "<|endoftext|>", "special": True}], "normalizer": None,
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
     "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
     "model": {"type": "BPE", "vocab": vocab, "merges": [G + " t", "h e", G + "t he", "i n", "c a", "ca t", "1 2"]}}
open(os.path.join(OUT, "fuzz_tokenizer_json", "byte_level.json"), "w").write(json.dumps(j, ensure_ascii=False))
PY

# The project's own writers: synth (SentencePiece-style tokenizer.json), convert to GGUF with and
# without an embedded vocabulary, in each dtype.
"$KVP" synth --preset tiny --format hf --dtype fp16 --out "$T/synth_hf" 2>/dev/null
cp "$T/synth_hf/tokenizer.json" "$OUT/fuzz_tokenizer_json/synthetic_spm.json"
cp "$T/synth_hf/config.json" "$OUT/fuzz_hf_config/synth_tiny.json"
# The mixtures of experts' configs (their experts' fields, defaults and dense layers), and OLMo-2's.
for fam in olmo2 mixtral qwen2_moe qwen3_moe olmoe; do
  "$KVP" synth --arch $fam --out "$T/synth_$fam" 2>/dev/null && cp "$T/synth_$fam/config.json" "$OUT/fuzz_hf_config/synth_$fam.json"
done
for arch in llama qwen2; do
  for dt in F32 F16 BF16; do
    "$KVP" convert --model "$T/${arch}_$dt" --to gguf --out "$OUT/fuzz_gguf/${arch}_${dt}_novocab.gguf" 2>/dev/null || true
  done
  "$KVP" convert --model "$T/${arch}_F32" --tokenizer "$T/synth_hf/tokenizer.json" --to gguf \
    --out "$OUT/fuzz_gguf/${arch}_spm.gguf" 2>/dev/null || true
done
for kind in mixtral qwen2_moe olmoe; do
  "$KVP" convert --model "$T/$kind" --to gguf --out "$OUT/fuzz_gguf/${kind}_F16.gguf" 2>/dev/null || true
done
# EXAONE 4.0's hybrid (its window and bool-a-layer pattern, global NoPE layers).
"$KVP" synth --arch exaone4 --preset tiny --format gguf --dtype fp16 --out "$OUT/fuzz_gguf/exaone4_F16.gguf" 2>/dev/null || true
# llama.cpp's phi3 with a partial rotary dimension and longrope (its factor tensors and keys), and
# the config.json that says them, as the Phi-3 replay writes them.
if /usr/bin/python3 tests/phi3_rotary_reference.py "$T/phi3_rotary" 11 --gguf >/dev/null 2>&1; then
  cp "$T/phi3_rotary/model.gguf" "$OUT/fuzz_gguf/phi3_longrope_F32.gguf"
  cp "$T/phi3_rotary/config.json" "$OUT/fuzz_hf_config/phi3_longrope.json"
fi
# Quantised blocks, for the scalar-vs-vectorised decoder check (rows of 32 and 64 values take the
# 32-value formats).
for qt in Q8_0 Q4_0 Q5_1 IQ4_NL; do
  "$KVP" convert --model "$T/llama_q" --to gguf --quant $qt --out "$OUT/fuzz_gguf/llama_$qt.gguf" 2>/dev/null || true
done

# Shared tiny models, when the data is there (never copied into the repository).
if [ -d "$M" ]; then
  for d in stories260K aidreams260K; do
    [ -f "$M/$d/tok512.bin" ] && cp "$M/$d/tok512.bin" "$OUT/fuzz_tokenizer_bin/$d-tok512.bin"
    [ -f "$M/$d/hf/config.json" ] && cp "$M/$d/hf/config.json" "$OUT/fuzz_hf_config/$d.json"
    [ -f "$M/$d/$d.bin" ] && cp "$M/$d/$d.bin" "$OUT/fuzz_llama2c/$d.bin"
    if [ -f "$M/$d/hf/model.safetensors" ]; then
      cp "$M/$d/hf/model.safetensors" "$OUT/fuzz_safetensors/$d.safetensors"
      if [ -f "$M/$d/tok512.bin" ]; then
        "$KVP" convert --model "$M/$d/hf" --tokenizer "$M/$d/tok512.bin" --to gguf --dtype fp16 \
          --out "$OUT/fuzz_gguf/$d.gguf" 2>/dev/null || true
      fi
    fi
  done
  [ -f "$M/llama2-tokenizer/tokenizer.bin" ] && cp "$M/llama2-tokenizer/tokenizer.bin" "$OUT/fuzz_tokenizer_bin/llama2.bin"
  [ -f "$M/llama2-tokenizer/tokenizer.model" ] && cp "$M/llama2-tokenizer/tokenizer.model" "$OUT/fuzz_tokenizer_model/llama2.model"
fi
rm -rf "$T"
for t in "$OUT"/*/; do printf '%s: %s seeds\n' "$(basename "$t")" "$(ls "$t" | wc -l)"; done
