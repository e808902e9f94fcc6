"""The files the float64 replays (gpt_oss_reference.py, phi3_rotary_reference.py) write their tiny
checkpoints as: safetensors (F32, or U8 for packed blocks) and GGUF v3 (ggml docs/gguf.md), from
the published formats, sharing no code with kvparity. Standard library and numpy only.
"""
import json
import struct
from pathlib import Path

import numpy as np


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        u8 = tensors[name].dtype == np.uint8
        data = np.ascontiguousarray(tensors[name], dtype=np.uint8 if u8 else "<f4").tobytes()
        header[name] = {"dtype": "U8" if u8 else "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def gguf_string(v):
    return struct.pack("<Q", len(v.encode())) + v.encode()


class Gguf:
    """Metadata and tensors collected in file order, then written 32-aligned."""

    def __init__(self, arch):
        self.kv, self.tensors = [], []
        self.string("general.architecture", arch)

    def u32(self, k, v):
        self.kv.append((k, 4, struct.pack("<I", v)))

    def f32(self, k, v):
        self.kv.append((k, 6, struct.pack("<f", v)))

    def string(self, k, v):
        self.kv.append((k, 8, gguf_string(v)))

    def f32_tensor(self, name, a):  # a numpy array in [outer, ..., inner] order
        self.tensors.append((name, list(a.shape[::-1]), 0, np.ascontiguousarray(a, dtype="<f4").tobytes()))

    def raw_tensor(self, name, ne, ggml_type, data):  # ne innermost first
        self.tensors.append((name, ne, ggml_type, data))

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for k, t, v in self.kv:
            out += gguf_string(k) + struct.pack("<I", t) + v
        offset, blobs = 0, []
        for name, ne, ty, data in self.tensors:
            out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
            out += struct.pack("<IQ", ty, offset)
            blobs.append((offset, data))
            offset += (len(data) + 31) // 32 * 32
        out += b"\0" * (-len(out) % 32)
        base = len(out)
        for at, data in blobs:
            out += b"\0" * (base + at - len(out)) + data
        Path(path).write_bytes(bytes(out))
