"""The conformance checker's optional cross-check (gguf_conformance.py --hf-reference): every tensor
of a GGUF file against a Hugging Face checkpoint, transformed as llama.cpp's convert_hf_to_gguf.py
transforms it. Standard library only; shares no code with kvparity.
"""
import json
import os
import re
import struct

from gguf_llama_checks import scalar

# ---------------------------------------------------------------------------------------------
# Optional cross-check against a Hugging Face checkpoint

def hf_to_gguf_name(h, arch):
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if h in fixed:
        return fixed[h]
    m = re.match(r"^model\.layers\.(\d+)\.(.+)$", h)
    if not m:
        return None
    i, rest = m.group(1), m.group(2)
    table = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    if arch in ("olmo2", "exaone4"):
        table.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                      "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
    elif arch in ("gemma2", "gemma3"):
        table.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                      "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                      "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
    else:
        table["post_attention_layernorm.weight"] = "ffn_norm.weight"
    if arch in ("qwen3", "gemma3", "olmo2", "exaone4"):
        table.update({"self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight"})
    return "blk.%s.%s" % (i, table[rest]) if rest in table else None


def decode(buf, dtype):
    n = len(buf) // (4 if dtype == "F32" else 2)
    if dtype == "F32":
        return list(struct.unpack("<%df" % n, buf))
    if dtype == "F16":
        return list(struct.unpack("<%de" % n, buf))
    if dtype == "BF16":
        hs = struct.unpack("<%dH" % n, buf)
        return list(struct.unpack("<%df" % n, struct.pack("<%dI" % n, *[h << 16 for h in hs])))
    raise ValueError(dtype)


def permute_rows(buf, n_rows, n_head, elem_bytes_per_row):
    """llama.cpp's convert_hf_to_gguf permute: reshape(n_head, 2, hd/2, ...).swapaxes(1, 2) on the rows."""
    hd = n_rows // n_head
    out = bytearray(len(buf))
    rb = elem_bytes_per_row
    for h in range(n_head):
        for i in range(hd // 2):
            for j in range(2):
                new_r = h * hd + i * 2 + j
                old_r = h * hd + j * (hd // 2) + i
                out[new_r * rb:(new_r + 1) * rb] = buf[old_r * rb:(old_r + 1) * rb]
    return bytes(out)


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hl,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + hl].decode("utf-8"))
    base = 8 + hl
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], blob[base + s:base + e])
    return out


def check_against_hf(hf_dir, data, kv, tensors, data_offset, arch_hp, rep):
    rep.check("cross-check vs HF checkpoint: hparams equal config.json; every tensor equals the HF tensor "
              "after llama.cpp's conversion (names, reversed dims, llama/mistral3 q/k RoPE permute, gemma2 norm +1)")
    if arch_hp is None:
        rep.fail("cannot cross-check against %s: architecture/hparams not usable" % hf_dir)
        return
    arch, hp = arch_hp
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    st = {}
    idx = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        for s in shards:
            st.update(load_safetensors(os.path.join(hf_dir, s)))
    else:
        st = load_safetensors(os.path.join(hf_dir, "model.safetensors"))

    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    pairs = [("n_embd", "hidden_size"), ("n_ff", "intermediate_size"), ("n_layer", "num_hidden_layers"),
             ("n_head", "num_attention_heads"), ("n_ctx", "max_position_embeddings")]
    for ours, theirs in pairs:
        if theirs in cfg and hp[ours] != cfg[theirs]:
            rep.fail("hparam %s = %r but HF config %s = %r" % (ours, hp[ours], theirs, cfg[theirs]))
    if hp["n_head_kv"] != n_kv:
        rep.fail("head_count_kv = %d but HF num_key_value_heads = %d" % (hp["n_head_kv"], n_kv))
    A = arch + "."
    eps, theta = scalar(kv, A + "attention.layer_norm_rms_epsilon"), scalar(kv, A + "rope.freq_base", 10000.0)
    if "rms_norm_eps" in cfg and abs(eps - cfg["rms_norm_eps"]) > 1e-6 * max(1.0, cfg["rms_norm_eps"]) + 1e-12:
        rep.fail("layer_norm_rms_epsilon %r != HF rms_norm_eps %r" % (eps, cfg["rms_norm_eps"]))
    if "rope_theta" in cfg and abs(theta - cfg["rope_theta"]) > 1e-6 * cfg["rope_theta"]:
        rep.fail("rope.freq_base %r != HF rope_theta %r" % (theta, cfg["rope_theta"]))

    by_name = {t["name"]: t for t in tensors}
    gtypes = {0: "F32", 1: "F16", 30: "BF16"}
    compared, mapped = 0, set()
    for hname, (dtype, shape, buf) in st.items():
        g = hf_to_gguf_name(hname, arch)
        if g is None:
            rep.fail("HF tensor '%s' has no llama.cpp name for %s" % (hname, arch))
            continue
        mapped.add(g)
        t = by_name.get(g)
        if t is None:
            rep.fail("HF tensor '%s' (-> '%s') is missing from the GGUF" % (hname, g))
            continue
        if t["ne"] != list(reversed(shape)):
            rep.fail("'%s': GGUF ne %s is not HF shape %s reversed" % (g, t["ne"], shape))
            continue
        if dtype not in ("F32", "F16", "BF16") or t["type"] not in gtypes:
            rep.fail("'%s': cannot compare dtypes %s / %d" % (g, dtype, t["type"]))
            continue
        want = buf
        if arch in ("llama", "mistral3") and re.search(r"\.(q_proj|k_proj)\.(weight|bias)$", hname):
            heads = n_head if ".q_proj." in hname else n_kv
            row_bytes = len(buf) // shape[0]
            want = permute_rows(buf, shape[0], heads, row_bytes)
        start = data_offset + t["offset"]
        got = bytes(data[start:start + t["nbytes"]])
        gdt = gtypes[t["type"]]
        add_one = arch in ("gemma2", "gemma3") and hname.endswith("norm.weight")
        if gdt == dtype and not add_one:
            if got != want:
                a, b = decode(got, gdt), decode(want, dtype)
                k = next(i for i in range(len(a)) if a[i] != b[i] and not (a[i] != a[i] and b[i] != b[i]))
                rep.fail("'%s' differs from HF '%s' after llama.cpp's transform (first at element %d: %r vs %r)"
                         % (g, hname, k, a[k], b[k]))
        else:
            a, b = decode(got, gdt), decode(want, dtype)
            if add_one:
                b = [x + 1.0 for x in b]
            tol = {"F32": 1e-6, "F16": 1e-3, "BF16": 8e-3}[gdt]
            for i, (x, y) in enumerate(zip(a, b)):
                if abs(x - y) > tol * max(1.0, abs(y)):
                    rep.fail("'%s' differs from HF '%s' (element %d: %r vs %r, %s vs %s)" % (g, hname, i, x, y, gdt, dtype))
                    break
        compared += 1
    for t in tensors:
        if t["name"] not in mapped and not (t["name"] == "output.weight" and cfg.get("tie_word_embeddings")):
            rep.fail("GGUF tensor '%s' has no counterpart in the HF checkpoint" % t["name"])
    rep.summary["hf_tensors_compared"] = compared
