"""What llama.cpp's loader expects of a GGUF file beyond the container (gguf_conformance.py): key
types as llama-model-loader checks them, tensor names and shapes per architecture (llama with or
without experts, qwen2, qwen3, gemma2, gemma3, olmo2, exaone4, mistral3, and the mixtures of experts
qwen2moe, qwen3moe, olmoe, gpt-oss), and the tokenizer's keys. Standard library only; shares no code with kvparity.
"""
import math
import re

from gguf_format import FLOAT_TYPES, GGML_TYPES, QUANT_TYPES, TYPE_NAMES, T_ARR, T_F32, T_I32, T_U32, Value

# ---------------------------------------------------------------------------------------------
# llama.cpp expectations per architecture

MOE_ARCHS = ("qwen2moe", "qwen3moe", "olmoe", "gpt-oss")  # llama.cpp requires experts in every layer of these
KNOWN_ARCHS = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "olmo2", "exaone4", "mistral3") + MOE_ARCHS

# Key types exactly as llama.cpp reads them (llama-model-loader checks the GGUF type strictly;
# gguf-py's add_* writers use the same types). "u32|arr" = uint32 or a per-layer array.
def arch_keys(arch):
    a = arch + "."
    required = {
        a + "context_length": "u32",
        a + "embedding_length": "u32",
        a + "block_count": "u32",
        a + "feed_forward_length": "u32|arr",
        a + "attention.head_count": "u32|arr",
        a + "attention.layer_norm_rms_epsilon": "f32",
    }
    optional = {
        a + "attention.head_count_kv": "u32|arr",
        a + "rope.freq_base": "f32",
        a + "rope.dimension_count": "u32",
        a + "attention.key_length": "u32",
        a + "attention.value_length": "u32",
        a + "attention.sliding_window": "u32",
        a + "vocab_size": "u32",
        a + "expert_count": "u32",
        a + "expert_used_count": "u32",
        a + "expert_feed_forward_length": "u32",
        a + "expert_shared_feed_forward_length": "u32",
        a + "expert_weights_norm": "bool",
        a + "expert_weights_scale": "f32",
        a + "rope.scaling.type": "string",
        a + "rope.scaling.factor": "f32",
        a + "rope.scaling.original_context_length": "u32",
        a + "rope.scaling.yarn_beta_fast": "f32",
        a + "rope.scaling.yarn_beta_slow": "f32",
        a + "rope.scaling.finetuned": "bool",
        a + "rope.scale_linear": "f32",
        a + "attn_logit_softcapping": "f32",
        a + "final_logit_softcapping": "f32",
        a + "tensor_data_layout": "string",
        # llama.cpp's later key names for what it fixes per Gemma-3 (pattern 6, local base 10000),
        # which kvparity writes so that other patterns and bases round-trip.
        a + "attention.sliding_window_pattern": "u32",
        a + "rope.freq_base_swa": "f32",
    }
    # olmo2 (OLMo-3) and exaone4: the converter writes one bool a layer (add_sliding_window_pattern of a list).
    if arch in ("olmo2", "exaone4"):
        optional[a + "attention.sliding_window_pattern"] = "arr:bool"
    if arch == "mistral3":  # its load_hparams: the Llama-4 temperature, YaRN's log multiplier
        optional[a + "attention.temperature_scale"] = "f32"
        optional[a + "rope.scaling.yarn_log_multiplier"] = "f32"
    if arch == "gpt-oss":  # llama.cpp's openai-moe load_hparams reads these without a default
        for k in ("attention.sliding_window", "expert_count", "expert_used_count", "expert_feed_forward_length"):
            required[a + k] = optional.pop(a + k)
    return required, optional


GENERAL_KEYS = {
    "general.architecture": "string",
    "general.name": "string",
    "general.alignment": "u32",
    "general.file_type": "u32",
    "general.quantization_version": "u32",
}
TOKENIZER_KEYS = {
    "tokenizer.ggml.model": "string",
    "tokenizer.ggml.pre": "string",
    "tokenizer.ggml.tokens": "arr:string",
    "tokenizer.ggml.scores": "arr:f32",
    "tokenizer.ggml.token_type": "arr:i32",
    "tokenizer.ggml.merges": "arr:string",
    "tokenizer.ggml.bos_token_id": "u32",
    "tokenizer.ggml.eos_token_id": "u32",
    "tokenizer.ggml.unknown_token_id": "u32",
    "tokenizer.ggml.separator_token_id": "u32",
    "tokenizer.ggml.padding_token_id": "u32",
    "tokenizer.ggml.add_bos_token": "bool",
    "tokenizer.ggml.add_eos_token": "bool",
    "tokenizer.ggml.add_space_prefix": "bool",
    "tokenizer.ggml.remove_extra_whitespaces": "bool",
    "tokenizer.chat_template": "string",
}
TYPE_BY_NAME = {n: i for i, n in enumerate(TYPE_NAMES)}


def type_ok(val, spec, n_layer=None):
    if spec == "u32|arr":
        if val.type == T_U32:
            return True
        return val.type == T_ARR and val.elem in (T_U32, T_I32) and (n_layer is None or len(val.value) == n_layer)
    if spec.startswith("arr:"):
        return val.type == T_ARR and val.elem == TYPE_BY_NAME[spec[4:]]
    return val.type == TYPE_BY_NAME[spec]


def check_key_types(kv, table, rep, n_layer=None):
    for k, spec in table.items():
        if k in kv and not type_ok(kv[k], spec, n_layer):
            rep.fail("key '%s' has type %s; llama.cpp reads it as %s (strict type check in llama-model-loader)"
                     % (k, kv[k].describe(), spec))


def scalar(kv, k, default=None):
    v = kv.get(k)
    if v is None:
        return default
    if v.type == T_ARR:
        return v.value[0] if v.value and not isinstance(v.value[0], Value) else default
    return v.value


def expected_tensors(arch, hp):
    """name -> (ne list, required) following llama.cpp's create_tensor calls for the architecture."""
    E, V, L, F = hp["n_embd"], hp["n_vocab"], hp["n_layer"], hp["n_ff"]
    hk, hv, H, HKV = hp["head_k"], hp["head_v"], hp["n_head"], hp["n_head_kv"]
    q_out, k_out, v_out = hk * H, hk * HKV, hv * HKV
    NE, NU = hp["n_expert"], hp["n_expert_used"]
    moe = arch in MOE_ARCHS or (arch == "llama" and NE > 0)
    if arch in ("qwen2moe", "olmoe"):  # q and o are {n_embd, n_embd} there
        q_out = E
    exp = {"token_embd.weight": ([E, V], True), "output_norm.weight": ([E], True)}
    if arch in ("llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "exaone4", "mistral3"):
        exp["output.weight"] = ([E, V], False)  # TENSOR_NOT_REQUIRED: falls back to token_embd
    if arch in ("olmo2", "qwen2moe", "olmoe", "gpt-oss"):
        exp["output.weight"] = ([E, V], True)
    # The experts' width: feed_forward_length itself for llama and olmoe; for the Qwen MoEs
    # expert_feed_forward_length, else feed_forward_length / expert_used_count.
    FE = F if arch in ("llama", "olmoe") else (hp["n_ff_exp"] or (F // NU if NU else 0))
    if arch == "gpt-oss":  # llama.cpp's openai-moe loader: its own names, biases everywhere, sinks
        FE = hp["n_ff_exp"]
    FS = hp["n_ff_shexp"] or F  # qwen2moe's shared expert
    for i in range(L):
        b = "blk.%d." % i
        if arch == "gpt-oss":
            exp[b + "attn_norm.weight"] = ([E], True)
            exp[b + "post_attention_norm.weight"] = ([E], True)
            exp[b + "attn_sinks.weight"] = ([H], True)
            exp[b + "ffn_gate_inp.bias"] = ([NE], True)
            for n, ne in (("attn_q", q_out), ("attn_k", k_out), ("attn_v", v_out), ("attn_output", E)):
                exp[b + n + ".bias"] = ([ne], True)
            for n, ne in (("ffn_gate_exps", FE), ("ffn_up_exps", FE), ("ffn_down_exps", E)):
                exp[b + n + ".bias"] = ([ne, NE], True)
        elif arch not in ("olmo2", "exaone4"):  # these normalise the blocks' outputs only
            exp[b + "attn_norm.weight"] = ([E], True)
            exp[b + "ffn_norm.weight"] = ([E], True)
        exp[b + "attn_q.weight"] = ([E, q_out], True)
        exp[b + "attn_k.weight"] = ([E, k_out], True)
        exp[b + "attn_v.weight"] = ([E, v_out], True)
        exp[b + "attn_output.weight"] = ([q_out, E], True)
        if not moe:
            exp[b + "ffn_gate.weight"] = ([E, F], True)
            exp[b + "ffn_up.weight"] = ([E, F], True)
            exp[b + "ffn_down.weight"] = ([F, E], True)
        else:
            exp[b + "ffn_gate_inp.weight"] = ([E, NE], True)
            exp[b + "ffn_gate_exps.weight"] = ([E, FE, NE], arch != "llama")  # llama: TENSOR_NOT_REQUIRED
            exp[b + "ffn_up_exps.weight"] = ([E, FE, NE], True)
            exp[b + "ffn_down_exps.weight"] = ([FE, E, NE], True)
        if arch == "qwen2moe":
            exp[b + "ffn_gate_inp_shexp.weight"] = ([E], True)
            exp[b + "ffn_gate_shexp.weight"] = ([E, FS], True)
            exp[b + "ffn_up_shexp.weight"] = ([E, FS], True)
            exp[b + "ffn_down_shexp.weight"] = ([FS, E], True)
            exp[b + "attn_q.bias"] = ([E], False)
            exp[b + "attn_k.bias"] = ([k_out], False)
            exp[b + "attn_v.bias"] = ([v_out], False)
        if arch in ("llama", "mistral3"):
            exp[b + "attn_q.bias"] = ([q_out], False)
            exp[b + "attn_k.bias"] = ([k_out], False)
            exp[b + "attn_v.bias"] = ([v_out], False)
            exp[b + "attn_output.bias"] = ([E], False)
        elif arch == "qwen2":
            exp[b + "attn_q.bias"] = ([E], True)
            exp[b + "attn_k.bias"] = ([k_out], True)
            exp[b + "attn_v.bias"] = ([v_out], True)
        elif arch in ("gemma2", "gemma3", "olmo2", "exaone4"):
            exp[b + "post_attention_norm.weight"] = ([E], True)
            exp[b + "post_ffw_norm.weight"] = ([E], True)
        if arch in ("qwen3", "gemma3", "qwen3moe", "exaone4"):
            exp[b + "attn_q_norm.weight"] = ([hk], True)
            exp[b + "attn_k_norm.weight"] = ([hk], True)
        elif arch == "olmo2":  # over the whole projection
            exp[b + "attn_q_norm.weight"] = ([q_out], True)
            exp[b + "attn_k_norm.weight"] = ([k_out], True)
        elif arch == "olmoe":  # over the whole projection, both {n_embd}: multi-head attention only
            exp[b + "attn_q_norm.weight"] = ([E], True)
            exp[b + "attn_k_norm.weight"] = ([E], True)
    if arch in ("llama", "exaone4", "mistral3"):
        exp["rope_freqs.weight"] = ([hp["n_rot"] // 2], False)
    return exp


def check_arch(kv, tensors, rep):
    by_name = {t["name"]: t for t in tensors}
    rep.check("general.* key types (architecture string, alignment/file_type u32, name string)")
    check_key_types(kv, GENERAL_KEYS, rep)
    if "general.architecture" not in kv:
        rep.fail("missing required key 'general.architecture' (spec: required)")
        return None
    arch = kv["general.architecture"].value
    rep.summary["architecture"] = arch
    if arch not in KNOWN_ARCHS:
        rep.fail("general.architecture '%s' is not one this checker knows (%s)" % (arch, ", ".join(KNOWN_ARCHS)))
        return None
    if any(t["type"] not in FLOAT_TYPES for t in tensors):
        if "general.quantization_version" not in kv:
            rep.fail("non-float tensors present but general.quantization_version is missing (spec)")

    required, optional = arch_keys(arch)
    rep.check("%s.* required keys present with llama.cpp's types" % arch)
    for k in required:
        if k not in kv:
            rep.fail("missing required key '%s' (llama.cpp load_hparams for %s)" % (k, arch))
    n_layer = scalar(kv, arch + ".block_count")
    check_key_types(kv, required, rep, n_layer)
    check_key_types(kv, optional, rep, n_layer)
    for k in kv:
        if k.startswith(arch + ".") and k not in required and k not in optional:
            rep.warn("key '%s' is not one llama.cpp reads for %s (ignored by llama.cpp)" % (k, arch))
    if any(k not in kv for k in required):
        return None

    A = arch + "."
    hp = {}
    hp["n_ctx"] = scalar(kv, A + "context_length")
    hp["n_embd"] = scalar(kv, A + "embedding_length")
    hp["n_layer"] = scalar(kv, A + "block_count")
    hp["n_ff"] = scalar(kv, A + "feed_forward_length")
    hp["n_head"] = scalar(kv, A + "attention.head_count")
    hp["n_head_kv"] = scalar(kv, A + "attention.head_count_kv", hp["n_head"])
    rep.check("hyper-parameters: positive, head_count divisible by head_count_kv, rope dims == head dim (llama)")
    for k in ("n_ctx", "n_embd", "n_layer", "n_ff", "n_head", "n_head_kv"):
        if not isinstance(hp[k], int) or hp[k] <= 0:
            rep.fail("hyper-parameter %s = %r must be a positive integer" % (k, hp[k]))
            return None
    if hp["n_head"] % hp["n_head_kv"] != 0:
        rep.fail("attention.head_count %d is not a multiple of head_count_kv %d" % (hp["n_head"], hp["n_head_kv"]))
    hp["head_k"] = scalar(kv, A + "attention.key_length", hp["n_embd"] // hp["n_head"])
    hp["head_v"] = scalar(kv, A + "attention.value_length", hp["n_embd"] // hp["n_head"])
    hp["n_rot"] = scalar(kv, A + "rope.dimension_count", hp["head_k"])
    if arch in ("llama", "mistral3", "exaone4") and hp["n_rot"] != hp["head_k"]:
        rep.fail("%s: rope.dimension_count" % arch + " %d != head dim %d (llama.cpp: invalid n_rot)" % (hp["n_rot"], hp["head_k"]))
    if arch in ("qwen2", "qwen2moe", "olmoe") and hp["head_k"] * hp["n_head"] != hp["n_embd"]:
        rep.fail("%s: llama.cpp creates attn_q as {n_embd, n_embd}, so head_count * head dim must equal n_embd" % arch)
    if arch == "olmoe" and hp["n_head_kv"] != hp["n_head"]:
        rep.fail("olmoe: llama.cpp creates attn_k_norm as {n_embd}, so head_count_kv (%d) must equal head_count (%d)"
                 % (hp["n_head_kv"], hp["n_head"]))
    hp["n_expert"] = scalar(kv, A + "expert_count", 0)
    hp["n_expert_used"] = scalar(kv, A + "expert_used_count", 0)
    hp["n_ff_exp"] = scalar(kv, A + "expert_feed_forward_length", 0)
    hp["n_ff_shexp"] = scalar(kv, A + "expert_shared_feed_forward_length", 0)
    if arch in MOE_ARCHS or hp["n_expert"]:
        rep.check("experts: expert_count > 0 and 0 < expert_used_count <= expert_count")
        if not hp["n_expert"] or not hp["n_expert_used"]:
            rep.fail("%s: expert_count %d and expert_used_count %d must both be > 0 (llama.cpp: n_expert must be > 0)"
                     % (arch, hp["n_expert"], hp["n_expert_used"]))
        elif hp["n_expert_used"] > hp["n_expert"]:
            rep.fail("expert_used_count %d exceeds expert_count %d" % (hp["n_expert_used"], hp["n_expert"]))
    eps = scalar(kv, A + "attention.layer_norm_rms_epsilon")
    if not (isinstance(eps, float) and eps > 0 and math.isfinite(eps)):
        rep.fail("attention.layer_norm_rms_epsilon = %r must be a positive finite f32" % (eps,))
    fb = scalar(kv, A + "rope.freq_base")
    if fb is not None and not (isinstance(fb, float) and fb > 0 and math.isfinite(fb)):
        rep.fail("rope.freq_base = %r must be a positive finite f32" % (fb,))
    st = scalar(kv, A + "rope.scaling.type")
    if st is not None and st not in ("none", "linear", "yarn", "longrope"):
        rep.fail("rope.scaling.type '%s' is not one of none/linear/yarn/longrope" % st)

    # Vocabulary size: llama.cpp takes it from the token list and expects token_embd {n_embd, n_vocab}.
    toks = kv.get("tokenizer.ggml.tokens")
    emb = by_name.get("token_embd.weight")
    if toks is not None and toks.type == T_ARR:
        hp["n_vocab"] = len(toks.value)
    elif emb is not None and len(emb["ne"]) == 2:
        hp["n_vocab"] = emb["ne"][1]
    else:
        hp["n_vocab"] = -1
    rep.summary["hparams"] = hp

    rep.check("tensor names exactly llama.cpp's for the architecture; no unknown or missing tensors")
    rep.check("tensor ne[] order: ne[0] is the input dim (token_embd = [n_embd, n_vocab]) and shapes match hparams")
    exp = expected_tensors(arch, hp)
    for name, (ne, req) in exp.items():
        t = by_name.get(name)
        if t is None:
            if req:
                rep.fail("missing tensor '%s' (llama.cpp requires it for %s)" % (name, arch))
            continue
        if t["ne"] != ne:
            rep.fail("tensor '%s' has ne %s; llama.cpp expects %s (ne[0] innermost = input dim)" % (name, t["ne"], ne))
    for t in tensors:
        if t["name"] not in exp:
            m = re.match(r"^blk\.(\d+)\.", t["name"])
            why = (" (layer %s >= block_count %d)" % (m.group(1), hp["n_layer"])) if m and int(m.group(1)) >= hp["n_layer"] else ""
            rep.fail("tensor '%s' is not a %s tensor llama.cpp creates%s; it fails with 'wrong number of tensors'"
                     % (t["name"], arch, why))
    rep.check("tensor types: F32/F16/BF16 or block-quantised 2-D tensors; 1-D tensors F32 as llama.cpp's converter writes them")
    for t in tensors:
        if t["type"] in QUANT_TYPES:
            if len(t["ne"]) < 2:
                rep.fail("1-D tensor '%s' is %s; llama.cpp keeps 1-D tensors F32" % (t["name"], GGML_TYPES[t["type"]][0]))
            elif t["ne"][0] % GGML_TYPES[t["type"]][1] != 0:
                rep.fail("tensor '%s' (%s): ne[0] = %d is not a multiple of the block size %d"
                         % (t["name"], GGML_TYPES[t["type"]][0], t["ne"][0], GGML_TYPES[t["type"]][1]))
        elif t["type"] not in FLOAT_TYPES:
            rep.fail("tensor '%s' has ggml type %d; a writer should only emit F32/F16/BF16, Q4_0..Q6_K, IQ4_NL, "
                     "IQ4_XS or MXFP4" % (t["name"], t["type"]))
        elif len(t["ne"]) == 1 and t["type"] != 0:
            rep.warn("1-D tensor '%s' is %s; llama.cpp's converter always keeps 1-D tensors F32"
                     % (t["name"], GGML_TYPES[t["type"]][0]))
    ft = scalar(kv, "general.file_type")
    if ft is not None:
        types2d = {t["type"] for t in tensors if len(t["ne"]) >= 2}
        want = 32 if 30 in types2d else 1 if 1 in types2d else 0
        if types2d & QUANT_TYPES:
            # llama_ftype 2..18 name quantised mixes (25 MOSTLY_IQ4_NL, 30 MOSTLY_IQ4_XS, 38
            # MOSTLY_MXFP4_MOE); which one a mix is called is the writer's choice.
            if not (2 <= ft <= 18 or ft in (25, 30, 38)):
                rep.warn("general.file_type = %d but the file holds quantised tensors (llama_ftype 2..18, 25, 30 "
                         "or 38 expected)" % ft)
        elif ft != want:
            rep.warn("general.file_type = %d but the 2-D tensors suggest %d (ALL_F32=0, MOSTLY_F16=1, MOSTLY_BF16=32)" % (ft, want))
    return arch, hp


def check_tokenizer(kv, tensors, arch_hp, rep):
    rep.check("tokenizer.ggml.* types: model string, tokens string[], scores f32[], token_type i32[], ids u32, flags bool")
    check_key_types(kv, TOKENIZER_KEYS, rep)
    model = scalar(kv, "tokenizer.ggml.model")
    if model is None:
        rep.fail("missing 'tokenizer.ggml.model' (llama.cpp's vocab loader requires it; use 'none' for no vocab)")
        return
    known = ("llama", "gpt2", "bert", "t5", "rwkv", "ugm", "plamo2", "none", "no_vocab")
    if model not in known:
        rep.fail("tokenizer.ggml.model '%s' is not one llama.cpp knows (%s)" % (model, ", ".join(known)))
    if model in ("none", "no_vocab"):
        arch = scalar(kv, "general.architecture", "")
        if arch_hp is not None and (arch + ".vocab_size") not in kv:
            rep.warn("tokenizer.ggml.model is '%s' but %s.vocab_size is missing (llama.cpp then warns: "
                     "there is no vocab_size in metadata)" % (model, arch))
        return
    toks = kv.get("tokenizer.ggml.tokens")
    if toks is None or toks.type != T_ARR:
        rep.fail("missing 'tokenizer.ggml.tokens' (llama.cpp: cannot find tokenizer vocab in model file)")
        return
    n = len(toks.value)
    rep.summary["n_tokens"] = n
    rep.check("tokenizer arrays have equal lengths; vocab size == token_embd ne[1] (and output ne[1])")
    for k in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        v = kv.get(k)
        if v is not None and v.type == T_ARR and len(v.value) != n:
            rep.fail("%s has %d entries for %d tokens (spec: same length and index as tokens)" % (k, len(v.value), n))
    by_name = {t["name"]: t for t in tensors}
    for name in ("token_embd.weight", "output.weight"):
        t = by_name.get(name)
        if t is not None and len(t["ne"]) == 2 and t["ne"][1] != n:
            rep.fail("%s ne[1] = %d but the vocabulary has %d tokens" % (name, t["ne"][1], n))
    tt = kv.get("tokenizer.ggml.token_type")
    if tt is not None and tt.type == T_ARR and tt.elem == T_I32:
        bad = [i for i, x in enumerate(tt.value) if not 0 <= x <= 6]
        if bad:
            rep.fail("tokenizer.ggml.token_type has values outside 0..6 (first at index %d: %d)" % (bad[0], tt.value[bad[0]]))
    sc = kv.get("tokenizer.ggml.scores")
    if sc is not None and sc.type == T_ARR and sc.elem == T_F32:
        if any(not math.isfinite(x) and not (x == -math.inf) for x in sc.value):
            rep.fail("tokenizer.ggml.scores contains NaN or +inf")
    rep.check("special token ids are u32 and < vocab size")
    for k in ("bos", "eos", "unknown", "separator", "padding"):
        key = "tokenizer.ggml.%s_token_id" % k
        v = kv.get(key)
        if v is not None and v.type == T_U32 and v.value >= n:
            rep.fail("%s = %d is outside the %d-token vocabulary" % (key, v.value, n))
    if model == "gpt2":
        if "tokenizer.ggml.merges" not in kv:
            rep.fail("tokenizer model gpt2 without tokenizer.ggml.merges (llama.cpp: cannot find tokenizer merges)")
        if "tokenizer.ggml.pre" not in kv:
            rep.warn("gpt2 vocabulary without tokenizer.ggml.pre: llama.cpp falls back to the 'default' pre-tokenizer")
    strs = [x for x in toks.value if isinstance(x, str)]
    if len(strs) != n:
        rep.fail("tokenizer.ggml.tokens is not an array of strings")
        return
    if any(s == "" for s in strs):
        rep.warn("tokenizer.ggml.tokens contains empty strings (llama.cpp renames them [EMPTY_i])")
    if len(set(strs)) != n:
        rep.warn("tokenizer.ggml.tokens contains duplicates (llama.cpp's token_to_id keeps the last)")
    if model == "llama" and "<0x0A>" not in set(strs):
        rep.warn("SPM vocabulary without the byte token <0x0A> (llama.cpp warns: newline token not found)")
