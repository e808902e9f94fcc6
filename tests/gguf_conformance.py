#!/usr/bin/env python3
"""Independent GGUF conformance checker for files written by kvparity.

Written from the published specification (ggml docs/gguf.md, GGUF v3) and from what llama.cpp's
loader expects (ggml/src/gguf.cpp reader, llama-model-loader's strict key typing, llama-arch tensor
names, llama-model.cpp tensor shapes, gguf-py's key types). It shares no code with kvparity and uses
only the Python standard library, so a bug in kvparity's reader cannot hide the same bug in its writer.

Usage: gguf_conformance.py FILE.gguf [--hf-reference HF_DIR] [--quiet]

Prints a JSON report on stdout. Exit status: 0 conformant, 1 violations found, 2 usage / IO error.

--hf-reference HF_DIR compares every tensor against a Hugging Face checkpoint (config.json +
model.safetensors) the way llama.cpp's convert_hf_to_gguf.py would transform it: names mapped, dims
reversed, and for arch "llama" the q/k rows permuted to the adjacent-pair RoPE layout.
"""
import json
import math
import os
import re
import struct
import sys

# ---------------------------------------------------------------------------------------------
# Spec constants (docs/gguf.md)

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
GGML_MAX_NAME = 64  # ggml.h; gguf.cpp rejects names with length >= GGML_MAX_NAME
GGML_MAX_DIMS = 4

# gguf_metadata_value_type
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
              T_U64: "<Q", T_I64: "<q", T_F64: "<d"}

# ggml_type -> (name, block size, bytes per block) (ggml-common.h block structs).
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4),
              27: ("I64", 1, 8), 28: ("F64", 1, 8), 30: ("BF16", 1, 2),
              2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
              8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
              13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210)}
# Block-quantised types a quantising writer may emit for 2-D tensors.
QUANT_TYPES = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14}
FLOAT_TYPES = {0, 1, 30}

KEY_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


def tname(t):
    return TYPE_NAMES[t] if 0 <= t < len(TYPE_NAMES) else "type%d" % t


class ParseError(Exception):
    pass


class Reader:
    def __init__(self, data):
        self.d = data
        self.pos = 0

    def need(self, n, what):
        if n < 0 or self.pos + n > len(self.d):
            raise ParseError("truncated: %s needs %d bytes at offset %d, file has %d" % (what, n, self.pos, len(self.d)))

    def unpack(self, fmt, what):
        n = struct.calcsize(fmt)
        self.need(n, what)
        v = struct.unpack_from(fmt, self.d, self.pos)[0]
        self.pos += n
        return v

    def raw(self, n, what):
        self.need(n, what)
        b = self.d[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def string(self, what):
        n = self.unpack("<Q", what + " length")
        return self.raw(n, what)


class Value:
    """A parsed metadata value: type, python value, and for arrays the element type."""

    def __init__(self, vtype, value, elem=None):
        self.type = vtype
        self.value = value
        self.elem = elem

    def describe(self):
        if self.type == T_ARR:
            return "array[%s] of %d" % (tname(self.elem), len(self.value))
        return tname(self.type)


class Report:
    def __init__(self, path):
        self.path = path
        self.violations = []
        self.warnings = []
        self.checks = []
        self.summary = {}

    def fail(self, msg):
        self.violations.append(msg)

    def warn(self, msg):
        self.warnings.append(msg)

    def check(self, name):
        self.checks.append(name)


# ---------------------------------------------------------------------------------------------
# Structure (spec + ggml's gguf.cpp reader)

def read_value(r, rep, vtype, key, depth):
    if vtype in SCALAR_FMT:
        return Value(vtype, r.unpack(SCALAR_FMT[vtype], "value of '%s'" % key))
    if vtype == T_BOOL:
        b = r.unpack("<B", "bool value of '%s'" % key)
        if b not in (0, 1):
            rep.fail("key '%s': bool byte is %d (spec: 1-byte value where 0 is false and 1 is true)" % (key, b))
        return Value(T_BOOL, bool(b))
    if vtype == T_STR:
        at = r.pos
        s = r.string("string value of '%s'" % key)
        try:
            return Value(T_STR, s.decode("utf-8"))
        except UnicodeDecodeError:
            rep.fail("key '%s': string at offset %d is not valid UTF-8 (spec: UTF-8 string)" % (key, at))
            return Value(T_STR, s.decode("utf-8", "replace"))
    if vtype == T_ARR:
        if depth > 8:
            raise ParseError("key '%s': arrays nested more than 8 deep" % key)
        et = r.unpack("<I", "array element type of '%s'" % key)
        n = r.unpack("<Q", "array length of '%s'" % key)
        if et > T_F64:
            raise ParseError("key '%s': unknown array element type %d" % (key, et))
        if n > len(r.d) - r.pos:
            raise ParseError("key '%s': array length %d exceeds the bytes left in the file" % (key, n))
        if et in SCALAR_FMT:  # fast path for numeric arrays
            fmt = SCALAR_FMT[et][1]
            size = struct.calcsize("<" + fmt)
            r.need(size * n, "array data of '%s'" % key)
            vals = list(struct.unpack_from("<%d%s" % (n, fmt), r.d, r.pos))
            r.pos += size * n
            return Value(T_ARR, vals, et)
        items = [read_value(r, rep, et, key, depth + 1).value if et != T_ARR else read_value(r, rep, et, key, depth + 1)
                 for _ in range(n)]
        return Value(T_ARR, items, et)
    raise ParseError("key '%s': unknown value type %d (valid: 0..12)" % (key, vtype))


def align_up(x, a):
    return x + (a - x % a) % a


def parse(data, rep):
    """Parses the whole file; returns (kv dict, kv order, tensors list, alignment, data_offset)."""
    r = Reader(data)
    rep.check("magic 'GGUF'")
    magic = r.raw(4, "magic") if len(data) >= 4 else b""
    if magic != GGUF_MAGIC:
        raise ParseError("bad magic %r (spec: 0x47 0x47 0x55 0x46 'GGUF')" % magic)
    version = r.unpack("<I", "version")
    rep.check("version == 3")
    if version != 3:
        rep.fail("version is %d; the current spec (and this check) is version 3" % version)
    n_tensors = r.unpack("<Q", "tensor_count")
    n_kv = r.unpack("<Q", "metadata_kv_count")
    rep.summary.update(version=version, tensor_count=n_tensors, kv_count=n_kv, file_size=len(data))
    if n_tensors > len(data) or n_kv > len(data):
        raise ParseError("tensor_count %d / metadata_kv_count %d cannot fit in a %d-byte file" % (n_tensors, n_kv, len(data)))

    rep.check("metadata keys: ASCII, <= 65535 bytes, lower_snake_case segments separated by '.', unique")
    rep.check("metadata values: types 0..12, bool is 0/1, strings UTF-8, arrays typed and bounded")
    kv, order = {}, []
    for i in range(n_kv):
        at = r.pos
        kb = r.string("key #%d" % i)
        try:
            key = kb.decode("ascii")
        except UnicodeDecodeError:
            rep.fail("key #%d at offset %d is not ASCII (spec: keys must be valid ASCII)" % (i, at))
            key = kb.decode("ascii", "replace")
        if len(kb) > 65535:
            rep.fail("key '%s' is %d bytes; the spec allows at most 65535" % (key[:60], len(kb)))
        if not KEY_RE.match(key):
            rep.fail("key '%s' is not lower_snake_case segments separated by '.' (spec)" % key)
        vtype = r.unpack("<I", "value type of '%s'" % key)
        if vtype > T_F64:
            raise ParseError("key '%s': unknown value type %d (valid: 0..12)" % (key, vtype))
        val = read_value(r, rep, vtype, key, 0)
        if key in kv:
            rep.fail("duplicate metadata key '%s' (gguf.cpp rejects duplicate keys)" % key)
        kv[key] = val
        order.append(key)

    rep.check("general.alignment: u32, power of two, multiple of 8 (default 32 when absent)")
    alignment = DEFAULT_ALIGNMENT
    if "general.alignment" in kv:
        a = kv["general.alignment"]
        if a.type != T_U32:
            rep.fail("general.alignment has type %s; spec and gguf.cpp require u32" % a.describe())
        if a.type in SCALAR_FMT and isinstance(a.value, int) and a.value > 0 and a.value & (a.value - 1) == 0:
            alignment = a.value
            if a.value % 8 != 0:
                rep.fail("general.alignment = %d is not a multiple of 8 (spec)" % a.value)
        else:
            rep.fail("general.alignment = %r is not a non-zero power of two" % (a.value,))
    rep.summary["alignment"] = alignment

    rep.check("tensor infos: name UTF-8 and < 64 bytes, unique; 1..4 dims, each >= 1; known ggml type")
    tensors, seen = [], set()
    for i in range(n_tensors):
        at = r.pos
        nb = r.string("name of tensor #%d" % i)
        try:
            name = nb.decode("utf-8")
        except UnicodeDecodeError:
            rep.fail("tensor #%d name at offset %d is not UTF-8" % (i, at))
            name = nb.decode("utf-8", "replace")
        if len(nb) == 0:
            rep.fail("tensor #%d has an empty name" % i)
        if len(nb) >= GGML_MAX_NAME:
            rep.fail("tensor '%s': name is %d bytes; spec allows at most 64 and gguf.cpp needs < %d"
                     % (name, len(nb), GGML_MAX_NAME))
        nd = r.unpack("<I", "n_dimensions of '%s'" % name)
        if nd < 1 or nd > GGML_MAX_DIMS:
            raise ParseError("tensor '%s': n_dimensions = %d (1..%d allowed)" % (name, nd, GGML_MAX_DIMS))
        ne = [r.unpack("<Q", "dimension of '%s'" % name) for _ in range(nd)]
        gt = r.unpack("<I", "type of '%s'" % name)
        off = r.unpack("<Q", "offset of '%s'" % name)
        if name in seen:
            rep.fail("duplicate tensor name '%s'" % name)
        seen.add(name)
        if any(d < 1 for d in ne):
            rep.fail("tensor '%s': dimension list %s has a zero entry" % (name, ne))
        if gt not in GGML_TYPES:
            rep.fail("tensor '%s': ggml type %d is not a plain type this checker sizes (F32/F16/BF16/...)" % (name, gt))
        tensors.append({"name": name, "ne": ne, "type": gt, "offset": off, "info_at": at})

    end_of_infos = r.pos
    data_offset = align_up(end_of_infos, alignment)
    rep.summary.update(end_of_tensor_infos=end_of_infos, data_offset=data_offset)
    rep.check("padding before the data section is 0x00 up to the next multiple of ALIGNMENT")
    if data_offset > len(data) and tensors:
        rep.fail("data section would start at %d, past the end of the %d-byte file" % (data_offset, len(data)))
    elif any(b != 0 for b in data[end_of_infos:min(data_offset, len(data))]):
        rep.fail("padding bytes [%d, %d) before the data section are not all 0x00" % (end_of_infos, data_offset))

    rep.check("tensor offsets: multiple of ALIGNMENT, data inside the file, no overlap")
    rep.check("tensor offsets: contiguous in info order, each advancing by nbytes padded to ALIGNMENT (gguf.cpp)")
    rep.check("tensor sizes: product(ne) * type size")
    expected, spans = 0, []
    for t in tensors:
        numel = 1
        for d in t["ne"]:
            numel *= d
        t["numel"] = numel
        if t["type"] in GGML_TYPES:
            _, blk, bsz = GGML_TYPES[t["type"]]
            t["nbytes"] = numel // blk * bsz
        else:
            t["nbytes"] = None
        off = t["offset"]
        if off % alignment != 0:
            rep.fail("tensor '%s': offset %d is not a multiple of ALIGNMENT %d (spec)" % (t["name"], off, alignment))
        if off != expected:
            rep.fail("tensor '%s': offset %d, but gguf.cpp expects %d (previous tensors' sizes padded to %d, in info order)"
                     % (t["name"], off, expected, alignment))
        if t["nbytes"] is None:
            expected = off
            continue
        start = data_offset + off
        end = start + t["nbytes"]
        if end > len(data):
            rep.fail("tensor '%s': data [%d, %d) extends past the end of the file (%d bytes)" % (t["name"], start, end, len(data)))
        spans.append((start, end, t["name"]))
        expected = off + align_up(t["nbytes"], alignment)
    spans.sort()
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        if s1 < e0:
            rep.fail("tensors '%s' and '%s' overlap" % (n0, n1))
    rep.check("gaps between tensors are 0x00 padding")
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        if s1 > e0 and any(b != 0 for b in data[e0:s1]):
            rep.fail("padding between '%s' and '%s' is not all 0x00" % (n0, n1))
    rep.summary["data_section_size"] = expected
    if tensors and data_offset + expected > len(data):
        rep.warn("file ends at %d, before the padded end of the data blob %d (gguf.cpp reads the whole padded "
                 "blob when it loads data; gguf-py pads the last tensor too)" % (len(data), data_offset + expected))
    elif tensors and len(data) > data_offset + expected:
        rep.warn("%d trailing bytes after the data section" % (len(data) - data_offset - expected))
    return kv, order, tensors, alignment, data_offset


# ---------------------------------------------------------------------------------------------
# llama.cpp expectations per architecture

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
        a + "rope.scaling.type": "string",
        a + "rope.scaling.factor": "f32",
        a + "rope.scaling.original_context_length": "u32",
        a + "rope.scaling.finetuned": "bool",
        a + "rope.scale_linear": "f32",
        a + "attn_logit_softcapping": "f32",
        a + "final_logit_softcapping": "f32",
        a + "tensor_data_layout": "string",
    }
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
    exp = {"token_embd.weight": ([E, V], True), "output_norm.weight": ([E], True)}
    if arch in ("llama", "qwen2"):
        exp["output.weight"] = ([E, V], False)  # TENSOR_NOT_REQUIRED: falls back to token_embd
    for i in range(L):
        b = "blk.%d." % i
        exp[b + "attn_norm.weight"] = ([E], True)
        exp[b + "attn_q.weight"] = ([E, q_out], True)
        exp[b + "attn_k.weight"] = ([E, k_out], True)
        exp[b + "attn_v.weight"] = ([E, v_out], True)
        exp[b + "attn_output.weight"] = ([q_out, E], True)
        exp[b + "ffn_norm.weight"] = ([E], True)
        exp[b + "ffn_gate.weight"] = ([E, F], True)
        exp[b + "ffn_up.weight"] = ([E, F], True)
        exp[b + "ffn_down.weight"] = ([F, E], True)
        if arch == "llama":
            exp[b + "attn_q.bias"] = ([q_out], False)
            exp[b + "attn_k.bias"] = ([k_out], False)
            exp[b + "attn_v.bias"] = ([v_out], False)
            exp[b + "attn_output.bias"] = ([E], False)
        elif arch == "qwen2":
            exp[b + "attn_q.bias"] = ([E], True)
            exp[b + "attn_k.bias"] = ([k_out], True)
            exp[b + "attn_v.bias"] = ([v_out], True)
        elif arch == "gemma2":
            exp[b + "post_attention_norm.weight"] = ([E], True)
            exp[b + "post_ffw_norm.weight"] = ([E], True)
    if arch == "llama":
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
    if arch not in ("llama", "qwen2", "gemma2"):
        rep.fail("general.architecture '%s' is not one this checker knows (llama, qwen2, gemma2)" % arch)
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
    if arch == "llama" and hp["n_rot"] != hp["head_k"]:
        rep.fail("llama: rope.dimension_count %d != head dim %d (llama.cpp: invalid n_rot)" % (hp["n_rot"], hp["head_k"]))
    if arch == "qwen2" and hp["head_k"] * hp["n_head"] != hp["n_embd"]:
        rep.fail("qwen2: llama.cpp creates attn_q as {n_embd, n_embd}, so head_count * head dim must equal n_embd")
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
            rep.fail("tensor '%s' has ggml type %d; a writer should only emit F32/F16/BF16 or Q4_0..Q6_K" % (t["name"], t["type"]))
        elif len(t["ne"]) == 1 and t["type"] != 0:
            rep.warn("1-D tensor '%s' is %s; llama.cpp's converter always keeps 1-D tensors F32"
                     % (t["name"], GGML_TYPES[t["type"]][0]))
    ft = scalar(kv, "general.file_type")
    if ft is not None:
        types2d = {t["type"] for t in tensors if len(t["ne"]) >= 2}
        want = 32 if 30 in types2d else 1 if 1 in types2d else 0
        if types2d & QUANT_TYPES:
            # llama_ftype 2..18 name quantised mixes; which one a mix is called is the writer's choice.
            if not (2 <= ft <= 18):
                rep.warn("general.file_type = %d but the file holds quantised tensors (llama_ftype 2..18 expected)" % ft)
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
    if arch == "gemma2":
        table.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                      "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                      "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
    else:
        table["post_attention_layernorm.weight"] = "ffn_norm.weight"
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
              "after llama.cpp's conversion (names, reversed dims, llama q/k RoPE permute, gemma2 norm +1)")
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
        if arch == "llama" and re.search(r"\.(q_proj|k_proj)\.(weight|bias)$", hname):
            heads = n_head if ".q_proj." in hname else n_kv
            row_bytes = len(buf) // shape[0]
            want = permute_rows(buf, shape[0], heads, row_bytes)
        start = data_offset + t["offset"]
        got = bytes(data[start:start + t["nbytes"]])
        gdt = gtypes[t["type"]]
        add_one = arch == "gemma2" and hname.endswith("norm.weight")
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


# ---------------------------------------------------------------------------------------------

def main(argv):
    args = argv[1:]
    hf = None
    quiet = False
    if "--quiet" in args:
        args.remove("--quiet")
        quiet = True
    if "--hf-reference" in args:
        i = args.index("--hf-reference")
        if i + 1 >= len(args):
            print("--hf-reference needs a directory", file=sys.stderr)
            return 2
        hf = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        print("cannot read %s: %s" % (path, e), file=sys.stderr)
        return 2
    rep = Report(path)
    arch_hp = None
    try:
        kv, order, tensors, alignment, data_offset = parse(data, rep)
        rep.summary["keys"] = {k: kv[k].describe() for k in order}
        rep.summary["tensors"] = [{"name": t["name"], "ne": t["ne"], "type": GGML_TYPES.get(t["type"], ("?",))[0],
                                   "offset": t["offset"]} for t in tensors]
        arch_hp = check_arch(kv, tensors, rep)
        check_tokenizer(kv, tensors, arch_hp, rep)
        if hf is not None:
            check_against_hf(hf, data, kv, tensors, data_offset, arch_hp, rep)
    except ParseError as e:
        rep.fail("parse error: %s" % e)
    except (OSError, ValueError, KeyError) as e:
        rep.fail("error: %s: %s" % (type(e).__name__, e))
    out = {"file": path, "conformant": not rep.violations, "violations": rep.violations, "warnings": rep.warnings,
           "checks": rep.checks, "summary": rep.summary}
    if quiet:
        out["summary"] = {k: v for k, v in rep.summary.items() if k not in ("keys", "tensors")}
    print(json.dumps(out, indent=2))
    return 0 if not rep.violations else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
