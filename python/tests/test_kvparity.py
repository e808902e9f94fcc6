"""The Python package against transformers' references, the CLI and itself (run by ctest as
python.pytest, with PYTHONPATH=build/python, KVPARITY_SHARED and KVPARITY_BIN set)."""

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import kvparity

FAMILIES = ["llama", "mistral", "gemma2", "qwen2"]


def shared(rel):
    root = os.environ.get("KVPARITY_SHARED")
    assert root, "set KVPARITY_SHARED to the shared/ directory (models/, reference/)"
    path = os.path.join(root, rel)
    assert os.path.exists(path), f"shared test data missing: {path}"
    return path


STORIES = "models/stories260K/stories260K.bin"
TOK = "models/stories260K/tok512.bin"


@pytest.fixture(scope="module")
def stories():
    return kvparity.load(shared(STORIES), tokenizer=shared(TOK), dtype="fp16", threads=1)


def cli(*args):
    return subprocess.run([os.environ["KVPARITY_BIN"], *args], capture_output=True, text=True)


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_matches_transformers(family):
    d = shared(f"reference/{family}")
    m = kvparity.load(d)
    assert m.config["arch"] == family
    hf = json.load(open(os.path.join(d, "config.json")))
    # fp32 fields read back as config.json wrote them (the shortest decimal, not the float widened)
    assert m.config["norm_eps"] == hf["rms_norm_eps"]
    assert m.config["rope_theta"] == hf.get("rope_theta", 10000.0)
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"]
    logits = m.forward(ids)
    ref = np.fromfile(os.path.join(d, "logits.f32"), dtype=np.float32).reshape(len(ids), -1)
    assert logits.shape == ref.shape and logits.dtype == np.float32
    assert np.max(np.abs(logits - ref)) <= 1e-4


def test_run_with_cache_names_shapes_and_logits(stories):
    c = stories.config
    ids = stories.tokenize("Once upon a time, there was")
    T, L, D, hd = len(ids), c["n_layers"], c["hidden_size"], c["head_dim"]
    logits, acts = stories.run_with_cache(ids)
    assert np.array_equal(logits, stories.forward(ids))
    assert acts["hook_embed"].shape == (T, D)
    assert acts["ln_final.hook_normalized"].shape == (T, D)
    for l in range(L):
        for h in ["hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post"]:
            assert acts[f"blocks.{l}.{h}"].shape == (T, D), h
        for h, heads in [("hook_q", c["n_heads"]), ("hook_rot_q", c["n_heads"]), ("hook_k", c["n_kv_heads"]),
                         ("hook_rot_k", c["n_kv_heads"]), ("hook_v", c["n_kv_heads"])]:
            assert acts[f"blocks.{l}.attn.{h}"].shape == (T, heads, hd), h
        # The residual stream adds up: resid_mid = resid_pre + attn_out (in fp16, to within its rounding).
        pre, att, mid = (acts[f"blocks.{l}.{h}"] for h in ["hook_resid_pre", "hook_attn_out", "hook_resid_mid"])
        assert np.allclose(pre + att, mid, rtol=2e-3, atol=2e-3)
    assert np.array_equal(acts["blocks.0.hook_resid_pre"], acts["hook_embed"])
    # Only the names asked for, by list or by predicate.
    _, some = stories.run_with_cache(ids, names=["blocks.1.hook_resid_post"])
    assert list(some) == ["blocks.1.hook_resid_post"]
    assert np.array_equal(some["blocks.1.hook_resid_post"], acts["blocks.1.hook_resid_post"])
    _, pred = stories.run_with_cache(ids, names=lambda n: n.endswith("hook_v"))
    assert sorted(pred) == [f"blocks.{l}.attn.hook_v" for l in range(L)]


def test_run_with_cache_on_the_cache_on_path(stories):
    prompt = stories.tokenize("Once upon a time")
    r = stories.generate(prompt, max_new_tokens=12, cache=True, return_logits=True, ignore_eos=True)
    ids = prompt + r["output_ids"][:-1]
    logits, acts = stories.run_with_cache(ids, cache=True, prefill=len(prompt))
    # The rows that chose each generated token are generate's step logits, bit for bit.
    assert np.array_equal(logits[len(prompt) - 1:], r["logits"])
    assert acts["blocks.0.hook_resid_post"].shape[0] == len(ids)
    # With the invariant kernels, cache ON and OFF activations are equal everywhere.
    inv = kvparity.load(shared(STORIES), tokenizer=shared(TOK), dtype="fp16", kernels="invariant", threads=2)
    on_l, on = inv.run_with_cache(ids, cache=True, prefill=len(prompt))
    off_l, off = inv.run_with_cache(ids)
    assert np.array_equal(on_l, off_l)
    assert sorted(on) == sorted(off)
    for k in on:
        assert np.array_equal(on[k], off[k]), k
    with pytest.raises(ValueError, match="prefill"):
        stories.run_with_cache(ids, prefill=2)


def test_portable_kernels_give_the_same_logits_on_every_simd_target():
    prompt = None
    runs = {}
    for simd in ("auto", "avx2", "scalar"):
        try:
            m = kvparity.load(shared(STORIES), tokenizer=shared(TOK), dtype="bf16", kernels="portable", simd=simd)
        except Exception as e:  # a CPU without AVX2 refuses it by name
            assert simd in str(e)
            continue
        prompt = prompt or m.tokenize("Once upon a time")
        runs[simd] = m.generate(prompt, max_new_tokens=16, cache=True, return_logits=True, ignore_eos=True)
    assert "auto" in runs and "scalar" in runs
    for simd, r in runs.items():
        assert r["output_ids"] == runs["auto"]["output_ids"], simd
        assert np.array_equal(r["logits"], runs["auto"]["logits"]), simd


def test_last_resid_post_through_final_norm_and_head_gives_the_logits():
    m = kvparity.load(shared("reference/llama"))
    d = shared("reference/llama")
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"]
    logits, acts = m.run_with_cache(ids)
    x = acts[f"blocks.{m.config['n_layers'] - 1}.hook_resid_post"].astype(np.float64)
    w = m.weight("model.norm.weight").astype(np.float64)
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + m.config["norm_eps"]) * w
    assert np.max(np.abs(normed - acts["ln_final.hook_normalized"])) <= 1e-5
    head = m.weight("lm_head.weight").astype(np.float64)
    assert np.max(np.abs(normed @ head.T - logits)) <= 1e-4


@pytest.mark.parametrize("cache", [True, False])
def test_generate_equals_the_cli(stories, cache):
    prompt = "Once upon a time"
    r = stories.generate(prompt, max_new_tokens=40, cache=cache, return_logits=True)
    out = cli("generate", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--dtype", "fp16", "--prompt", prompt,
              "--max-new-tokens", "40", "--cache", "on" if cache else "off", "--json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    for k in ["prompt_ids", "output_ids", "text", "stop_reason", "dtype", "kv_dtype", "kernels", "cache", "sampler"]:
        assert r[k] == j[k], k
    assert r["logits"].shape == (len(r["output_ids"]) + len(r["dropped_ids"]), stories.config["vocab_size"])
    # Seeded sampling: both paths draw the same numbers; ids in, the same tokens out.
    s1 = stories.generate(r["prompt_ids"], max_new_tokens=20, cache=cache, sampler="top-p", top_p=0.9, seed=7)
    s2 = stories.generate(prompt, max_new_tokens=20, cache=cache, sampler="top-p", top_p=0.9, seed=7)
    assert s1["output_ids"] == s2["output_ids"]


def test_compare_returns_the_summary(tmp_path):
    s = kvparity.compare(shared(STORIES), ["Once upon a time", "The dog"], tokenizer=shared(TOK),
                         out=str(tmp_path / "c"), dtype=["fp16"], kernels="standard,invariant", max_new_tokens=8)
    assert (tmp_path / "c" / "summary.json").exists()
    on_disk = json.load(open(tmp_path / "c" / "summary.json"))
    assert s == on_disk
    keys = [c["condition"] for c in s["conditions"]]
    assert keys == ["fp16/kv=fp16/standard/greedy", "fp16/kv=fp16/invariant/greedy"]
    inv = s["conditions"][1]
    assert inv["sequence_divergence_rate"] == 0
    # Without a folder: a temporary one, gone afterwards; SPECs as compare takes them.
    t = kvparity.compare(shared(STORIES), ["Once upon a time"], tokenizer=shared(TOK), max_new_tokens=4,
                         baseline="kv-dtype=fp16", candidate="kv-dtype=fp8_e4m3")
    assert t["conditions"][0]["condition"].startswith("fp16/kv=fp16->fp8_e4m3")


def test_errors_carry_the_clis_message(tmp_path):
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(kvparity.Error) as e:
        kvparity.load(missing)
    out = cli("generate", "--model", missing)
    assert out.returncode == 1
    assert out.stderr.strip() == "error: " + str(e.value)
    with pytest.raises(ValueError, match="dtype='fp8'"):
        kvparity.load(shared(STORIES), dtype="fp8")
    m = kvparity.load(shared(STORIES), tokenizer=shared(TOK))
    with pytest.raises(ValueError, match="not a token"):
        m.forward([1, 100000])
    with pytest.raises(ValueError, match="unknown option 'colour'"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), colour="red")
    with pytest.raises(ValueError, match="twice"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), baseline="threads=1,threads=2")


def test_a_signal_interrupts_generate_and_leaves_the_model_usable(stories):
    ids = stories.tokenize("Once upon a time")
    expected = stories.generate(ids, max_new_tokens=30, cache=False, ignore_eos=True)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # One call, seconds long (cache OFF over most of the context): the signal must stop it
            # from inside, between steps.
            stories.generate(ids, max_new_tokens=480, cache=False, ignore_eos=True)
    finally:
        timer.cancel()
    assert stories.generate(ids, max_new_tokens=30, cache=False, ignore_eos=True) == expected


def test_help_reads_well():
    assert "TransformerLens" in kvparity.Model.run_with_cache.__doc__
    assert "cache-free" in kvparity.Model.forward.__doc__
    assert kvparity.load.__doc__ and kvparity.compare.__doc__ and kvparity.__doc__


def test_the_example_writes_its_figure(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "divergence_plot.py")
    out = tmp_path / "d.png"
    r = subprocess.run([sys.executable, script, "--shared", os.environ["KVPARITY_SHARED"], "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "first divergence" in r.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simd_pins_the_kernels_target():
    d = shared("reference/qwen2")
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"]
    ref = np.fromfile(os.path.join(d, "logits.f32"), dtype=np.float32).reshape(len(ids), -1)
    m = kvparity.load(d, simd="scalar")
    assert m.config["simd"] == "scalar"
    assert np.max(np.abs(m.forward(ids) - ref)) <= 1e-4
    with pytest.raises(ValueError, match="simd"):
        kvparity.load(d, simd="avx3")


def test_version_and_build_are_the_clis():
    assert kvparity.__version__.count(".") == 2 and all(p.isdigit() for p in kvparity.__version__.split("."))
    assert kvparity.build.startswith(f"kvparity {kvparity.__version__} (commit ")
    out = subprocess.run([os.environ["KVPARITY_BIN"], "--version"], capture_output=True, text=True, check=True)
    assert out.stdout == kvparity.build + "\n"


def test_inspect_is_the_clis_json_and_what_a_load_sees(tmp_path):
    d = kvparity.inspect(shared(STORIES), batch_size=2)
    out = cli("inspect", "--model", shared(STORIES), "--batch-size", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert d == json.loads(out.stdout)
    m = kvparity.load(shared(STORIES))
    assert d["shape"]["layers"] == m.config["n_layers"] and d["shape"]["kv_heads"] == m.config["n_kv_heads"]
    assert d["tokenizer"]["vocab_size"] == 512
    fp16 = d["memory"]["rows"][1]
    assert fp16["dtype"] == "fp16" and fp16["kv_cache_bytes"] == fp16["kv_bytes_per_position"] * 512 * 2
    assert kvparity.inspect(shared(STORIES), kv_dtype="fp8_e4m3")["memory"]["rows"][0]["kv_dtype"] == "fp8_e4m3"
    with pytest.raises(ValueError, match="kv_dtype='fp7'"):
        kvparity.inspect(shared(STORIES), kv_dtype="fp7")
    with pytest.raises(kvparity.Error, match="no such file"):
        kvparity.inspect(str(tmp_path / "missing.gguf"))
