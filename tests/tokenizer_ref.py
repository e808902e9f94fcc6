#!/usr/bin/env python3
"""Reference data from SentencePiece for the tokenizer tests.

  tokenizer_ref.py encode MODEL < strings.json   -> JSON list of id lists (no BOS)
  tokenizer_ref.py dump MODEL                    -> JSON {tokens, scores, types, bos, eos, unk}
  tokenizer_ref.py hfjson MODEL                  -> a tokenizer.json (Llama-2 style BPE with merges)

Exit status 3 with a message when sentencepiece is not installed, so the C++ test can say why.
"""
import json
import sys

try:
    import sentencepiece as spm
except ImportError:
    sys.stderr.write("python module 'sentencepiece' is not installed (apt install python3-sentencepiece)\n")
    sys.exit(3)

META = "\u2581"


def load(path):
    sp = spm.SentencePieceProcessor()
    sp.Load(path)
    return sp


def token_type(sp, i):
    # GGUF numbering: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte.
    if sp.IsUnknown(i):
        return 2
    if sp.IsControl(i):
        return 3
    if sp.IsByte(i):
        return 6
    if sp.IsUnused(i):
        return 5
    return 1


def dump(sp):
    n = sp.GetPieceSize()
    return {
        "tokens": [sp.IdToPiece(i) for i in range(n)],
        "scores": [sp.GetScore(i) for i in range(n)],
        "types": [token_type(sp, i) for i in range(n)],
        "bos": sp.bos_id(),
        "eos": sp.eos_id(),
        "unk": sp.unk_id(),
    }


def hfjson(sp):
    d = dump(sp)
    vocab = {p: i for i, p in enumerate(d["tokens"])}
    normal = {p for p, t in zip(d["tokens"], d["types"]) if t == 1}
    # A piece can be made from any split into two pieces of the vocabulary; merges are ranked by the
    # score of the piece they make (higher first), then by the ids of the two halves.
    merges = []
    for p in normal:
        if len(p) < 2:
            continue
        score = d["scores"][vocab[p]]
        for k in range(1, len(p)):
            left, right = p[:k], p[k:]
            if left in normal and right in normal:
                merges.append((-score, vocab[left], vocab[right], left, right))
    merges.sort()
    added = [
        {"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, (p, t) in enumerate(zip(d["tokens"], d["types"])) if t in (2, 3)
    ]
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": META},
            {"type": "Replace", "pattern": {"String": " "}, "content": META}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [d["bos"]], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": META}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": [[m[3], m[4]] for m in merges]},
    }


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("encode", "dump", "hfjson"):
        sys.stderr.write(__doc__)
        sys.exit(2)
    sp = load(sys.argv[2])
    if sys.argv[1] == "encode":
        strings = json.load(sys.stdin)
        out = [sp.EncodeAsIds(s) for s in strings]
    elif sys.argv[1] == "dump":
        out = dump(sp)
    else:
        out = hfjson(sp)
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
