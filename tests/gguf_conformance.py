#!/usr/bin/env python3
"""Independent GGUF conformance checker for files written by kvparity.

Written from the published specification (ggml docs/gguf.md, GGUF v3) and from what llama.cpp's
loader expects (ggml/src/gguf.cpp reader, llama-model-loader's strict key typing, llama-arch tensor
names, llama-model.cpp tensor shapes, gguf-py's key types). It shares no code with kvparity and uses
only the Python standard library, so a bug in kvparity's reader cannot hide the same bug in its writer.

Usage: gguf_conformance.py FILE.gguf [--hf-reference HF_DIR] [--quiet]
       gguf_conformance.py FILE.gguf --dump-mxfp4 TENSOR

Prints a JSON report on stdout. Exit status: 0 conformant, 1 violations found, 2 usage / IO error.

--dump-mxfp4 TENSOR prints {"tensor", "ne", "f32_bits"}: the MXFP4 tensor's weights as decoded here
(gguf_format.mxfp4_f32_bits, from the OCP MX spec), fp32 bit patterns in file order, for a test to
compare with kvparity's dequantisation.

--hf-reference HF_DIR compares every tensor against a Hugging Face checkpoint (config.json +
model.safetensors) the way llama.cpp's convert_hf_to_gguf.py would transform it: names mapped, dims
reversed, and for arch "llama" the q/k rows permuted to the adjacent-pair RoPE layout.
"""
import json
import sys

sys.dont_write_bytecode = True  # the sibling modules below are the source tree's: leave no __pycache__ there
from gguf_format import GGML_TYPES, MXFP4, ParseError, Report, check_mxfp4, mxfp4_f32_bits, parse
from gguf_hf_crosscheck import check_against_hf
from gguf_llama_checks import check_arch, check_tokenizer

# ---------------------------------------------------------------------------------------------

def dump_mxfp4(data, rep, name):
    try:
        _, _, tensors, _, data_offset = parse(data, rep)
    except ParseError as e:
        print("parse error: %s" % e, file=sys.stderr)
        return 2
    t = next((t for t in tensors if t["name"] == name), None)
    if t is None or t["type"] != MXFP4:
        print("no MXFP4 tensor '%s' in the file" % name, file=sys.stderr)
        return 2
    start = data_offset + t["offset"]
    print(json.dumps({"tensor": name, "ne": t["ne"], "f32_bits": mxfp4_f32_bits(data[start:start + t["nbytes"]])}))
    return 0


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
    dump = None
    if "--dump-mxfp4" in args:
        i = args.index("--dump-mxfp4")
        if i + 1 >= len(args):
            print("--dump-mxfp4 needs a tensor name", file=sys.stderr)
            return 2
        dump = args[i + 1]
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
    if dump is not None:
        return dump_mxfp4(data, rep, dump)
    arch_hp = None
    try:
        kv, order, tensors, alignment, data_offset = parse(data, rep)
        rep.summary["keys"] = {k: kv[k].describe() for k in order}
        rep.summary["tensors"] = [{"name": t["name"], "ne": t["ne"], "type": GGML_TYPES.get(t["type"], ("?",))[0],
                                   "offset": t["offset"]} for t in tensors]
        check_mxfp4(data, tensors, data_offset, rep)
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
