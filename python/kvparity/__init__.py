"""kvparity: measure, explain and eliminate the cache-ON vs cache-OFF divergence of LLM inference.

The engine and the divergence lab of the kvparity command-line tool, in Python:

    import kvparity
    m = kvparity.load("stories260K.bin", tokenizer="tok512.bin", dtype="fp16")
    m.config                          # dict: arch, n_layers, hidden_size, n_heads, ..., context_length
    ids = m.tokenize("Once upon a time")
    logits = m.forward(ids)           # float32 ndarray [T, vocab]: one cache-free pass
    logits, acts = m.run_with_cache(ids)   # acts: TransformerLens names -> ndarray
    on = m.generate("Once upon a time", max_new_tokens=64, cache=True, return_logits=True)
    off = m.generate("Once upon a time", max_new_tokens=64, cache=False, return_logits=True)
    runs = m.generate_batch(["Once upon a time", "The dog"], max_new_tokens=64)  # one batch, a dict each
    summary = kvparity.compare("stories260K.bin", ["Once upon a time"], tokenizer="tok512.bin")
    kvparity.profile("stories260K.bin", "Once upon a time", tokenizer="tok512.bin")  # per-layer |Δ| at a step
    kvparity.patch("stories260K.bin", "Once upon a time", tokenizer="tok512.bin")    # patching at a divergence
    kvparity.inspect("stories260K.bin")   # dict: what `kvparity inspect --json` prints
    kvparity.eval_gsm8k("gsm8k/test.jsonl", "stories260K.bin", shots=0, limit=8)  # accuracy ON vs OFF
    kvparity.compare("stories260K.bin", "builtin:stories", out="s0", shard="0/2")  # a study in slices,
    kvparity.merge(["s0", "s1"], "all")                                             # joined as one

Errors the command-line tool reports with exit 1 raise kvparity.Error (same message); usage errors
(bad options or values) raise ValueError. Model work releases the GIL, and Ctrl-C stops a long
generate or compare between steps with KeyboardInterrupt.

kvparity.__version__ is the version ("0.1.0"); kvparity.build names the build as results folders
record it (built_by) and `kvparity --version` prints it: version, source commit, compiler, CUDA.
"""

from ._kvparity import Error, Model, __version__, build, compare, eval_gsm8k, inspect, merge, patch, profile

__all__ = [
    "Error", "Model", "__version__", "build", "compare", "eval_gsm8k", "inspect", "load", "merge", "patch", "profile"
]


def load(path, tokenizer=None, dtype="fp32", kv_dtype=None, kernels="standard", threads=0, device="cpu", simd="auto"):
    """Loads a checkpoint (HF safetensors directory, GGUF file or llama2.c .bin) as a Model.

    tokenizer: a tokenizer file (default: the one the model carries or sits beside).
    dtype: compute dtype, "fp32", "fp16" or "bf16". kv_dtype: what the KV cache stores (default: the
    compute dtype; also "q8_0", "q4_0", "fp8_e4m3", "fp8_e5m2"). kernels: "reference", "standard" or
    "invariant" (cache ON == OFF bit for bit) or "portable" (invariant, and the same bits on every
    machine). threads: 0 uses every core. device: "cpu" or "cuda".
    simd: the CPU kernels' SIMD target, "auto" (the best the CPU has), "avx512", "avx2" or "scalar".
    """
    return Model(path, tokenizer=tokenizer, dtype=dtype, kv_dtype=kv_dtype, kernels=kernels, threads=threads,
                 device=device, simd=simd)
