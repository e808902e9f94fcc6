"""The GGUF v3 container as the published specification (ggml docs/gguf.md) defines it, for the
conformance checker (gguf_conformance.py): constants, a bounds-checked reader, metadata values and
the parse of a whole file, reporting what breaks the specification or what gguf.cpp's reader would
refuse; and the decoding of MXFP4 blocks. Standard library only; shares no code with kvparity.
"""
import re
import struct

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
              13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136),
              39: ("MXFP4", 32, 17)}
# Block-quantised types a quantising writer may emit for 2-D tensors.
QUANT_TYPES = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 39}
MXFP4 = 39
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
    kv, order, hyphenated = {}, [], []
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
        head, dot, rest = key.partition(".")
        if KEY_RE.match(head.replace("-", "_") + dot + rest) and "-" in head:
            hyphenated.append(key)  # allowed below only under a hyphenated architecture's name
        elif not KEY_RE.match(key):
            rep.fail("key '%s' is not lower_snake_case segments separated by '.' (spec)" % key)
        vtype = r.unpack("<I", "value type of '%s'" % key)
        if vtype > T_F64:
            raise ParseError("key '%s': unknown value type %d (valid: 0..12)" % (key, vtype))
        val = read_value(r, rep, vtype, key, 0)
        if key in kv:
            rep.fail("duplicate metadata key '%s' (gguf.cpp rejects duplicate keys)" % key)
        kv[key] = val
        order.append(key)
    # llama.cpp names one architecture with a hyphen ("gpt-oss") and prefixes its keys with that
    # name; the spec's lower_snake_case holds everywhere else.
    arch = kv.get("general.architecture")
    for key in hyphenated:
        if arch is None or not isinstance(arch.value, str) or key.partition(".")[0] != arch.value:
            rep.fail("key '%s' is not lower_snake_case segments separated by '.' (spec)" % key)

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
# MXFP4 blocks, from the OCP Microscaling (MX) spec and ggml-common.h's block_mxfp4: an E8M0
# exponent byte e (scale 2^(e - 127)), then 16 bytes of FP4 E2M1 codes, weight j (0..15) in the low
# nibble of byte j and weight j + 16 in its high nibble.

def e2m1(code):
    """The OCP FP4 E2M1 value of a 4-bit code: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0."""
    e, m = (code >> 1) & 3, code & 1
    mag = m * 0.5 if e == 0 else (1.0 + m / 2.0) * 2.0 ** (e - 1)
    return -mag if code & 8 else mag


def f32_bits_of(v):
    """fp32 bits of v, a value fp32 holds exactly unless |v| >= 2^128, where fp32 arithmetic overflows to
    infinity: an MXFP4 weight has at most 2 significant bits and is at least 2^-128 (no rounding)."""
    if abs(v) >= 2.0 ** 128:
        return 0xFF800000 if v < 0 else 0x7F800000
    return struct.unpack("<I", struct.pack("<f", v))[0]


def mxfp4_f32_bits(buf):
    """The weights of consecutive MXFP4 blocks as fp32 bit patterns. A zero is +0 whatever its sign bit
    (ggml's table holds the levels as integers, so code 8, E2M1's -0, is +0)."""
    if len(buf) % 17:
        raise ParseError("MXFP4 data of %d bytes is not a whole number of 17-byte blocks" % len(buf))
    out = []
    for at in range(0, len(buf), 17):
        scale = 2.0 ** (buf[at] - 127)
        codes = [buf[at + 1 + j] & 0x0F for j in range(16)] + [buf[at + 1 + j] >> 4 for j in range(16)]
        out.extend(f32_bits_of(e2m1(c) * scale) if c & 7 else 0 for c in codes)
    return out


def check_mxfp4(data, tensors, data_offset, rep):
    """No MXFP4 weight may be infinite: a quantiser of finite weights sets e from the block's largest
    magnitude (ggml: floor(log2(amax)) + 125, at most 252 for fp32), and only e >= 253 with a large code
    reaches 2^128."""
    rep.check("MXFP4 tensors: every weight finite (no block exponent e >= 253 with a code that overflows fp32)")
    for t in tensors:
        if t["type"] != MXFP4 or t.get("nbytes") is None:
            continue
        start = data_offset + t["offset"]
        blob = data[start:start + t["nbytes"]]
        for b, e in enumerate(blob[0::17]):
            if e < 253:
                continue
            block = blob[17 * b:17 * b + 17]
            if len(block) == 17 and any(b2 in (0x7F800000, 0xFF800000) for b2 in mxfp4_f32_bits(block)):
                rep.fail("tensor '%s': MXFP4 block %d (exponent byte %d) decodes to an infinite weight"
                         % (t["name"], b, e))
                break
