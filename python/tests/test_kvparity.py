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

FAMILIES = ["llama", "mistral", "gemma2", "qwen2", "qwen3", "gemma3", "olmo2", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe"]


def shared(rel):
    root = os.environ.get("KVPARITY_SHARED")
    assert root, "set KVPARITY_SHARED to the shared/ directory (models/, reference/)"
    path = os.path.join(root, rel)
    assert os.path.exists(path), f"shared test data missing: {path}"
    return path


def reference(family):
    """transformers' outputs: shared/reference for four families, the repo's tests/data for the others."""
    if family in ("llama", "mistral", "gemma2", "qwen2"):
        return shared(f"reference/{family}")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "reference", family)
    assert os.path.isdir(path), f"reference outputs missing: {path}"
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
    d = reference(family)
    m = kvparity.load(d)
    assert m.config["family"] == family
    hf = json.load(open(os.path.join(d, "config.json")))
    # fp32 fields read back as config.json wrote them (the shortest decimal, not the float widened)
    assert m.config["norm_eps"] == hf["rms_norm_eps"]
    assert m.config["rope_theta"] == hf.get("rope_theta", 10000.0)
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"]
    logits = m.forward(ids)
    ref = np.fromfile(os.path.join(d, "logits.f32"), dtype=np.float32).reshape(len(ids), -1)
    assert logits.shape == ref.shape and logits.dtype == np.float32
    assert np.max(np.abs(logits - ref)) <= 1e-4


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe"])
def test_router_logits_are_transformers_and_name_the_sparse_layers(family):
    d = reference(family)
    m = kvparity.load(d)
    hf = json.load(open(os.path.join(d, "config.json")))
    assert m.config["n_experts"] == hf.get("num_local_experts", hf.get("num_experts"))
    assert m.config["experts_per_token"] == hf["num_experts_per_tok"]
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"]
    _, acts = m.run_with_cache(ids, names=lambda n: n.endswith("mlp.hook_router_logits"))
    dense = set(hf.get("mlp_only_layers", []))
    sparse = [l for l in range(hf["num_hidden_layers"]) if l not in dense]
    assert sorted(acts) == sorted(f"blocks.{l}.mlp.hook_router_logits" for l in sparse)
    ref = np.fromfile(os.path.join(d, "router_logits.f32"), dtype=np.float32).reshape(len(sparse), len(ids), -1)
    for i, l in enumerate(sparse):
        got = acts[f"blocks.{l}.mlp.hook_router_logits"]
        assert got.shape == ref[i].shape
        assert np.max(np.abs(got - ref[i])) <= 1e-4


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe"])
def test_generate_returns_the_experts_each_token_came_through(family):
    d = reference(family)
    m = kvparity.load(d, tokenizer=shared(TOK), kernels="invariant")
    k, n_layers = m.config["experts_per_token"], m.config["n_layers"]
    ids = json.load(open(os.path.join(d, "tokens.json")))["input_ids"][:6]
    r = m.generate(ids, max_new_tokens=4, ignore_eos=True)
    e = r["experts"]
    assert e.dtype == np.int32 and e.shape == (len(r["output_ids"]), n_layers, k)
    seq = list(ids)
    for step, tok in enumerate(r["output_ids"]):
        _, acts = m.run_with_cache(seq, names=lambda n: n.endswith("mlp.hook_router_logits"))
        for l in range(n_layers):
            name = f"blocks.{l}.mlp.hook_router_logits"
            if name not in acts:
                assert (e[step, l] == -1).all()  # a dense layer
                continue
            last = acts[name][-1]
            # The k largest router logits, largest first (the softmax keeps their order).
            assert sorted(e[step, l].tolist()) == sorted(np.argsort(-last, kind="stable")[:k].tolist())
            assert last[e[step, l][0]] == last.max()
        seq.append(tok)
    # A dense model has no routing to return.
    assert "experts" not in kvparity.load(reference("llama"), tokenizer=shared(TOK)).generate(ids, max_new_tokens=2)


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
    # In the pass's order, as TransformerLens's cache: the embedding, each layer's points, the final norm.
    names = list(acts)
    assert names[0] == "hook_embed" and names[-1] == "ln_final.hook_normalized"
    assert names[1:11] == [f"blocks.0.{h}" for h in ["hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_rot_q",
                                                      "attn.hook_rot_k", "attn.hook_v", "hook_attn_out",
                                                      "hook_resid_mid", "hook_mlp_out", "hook_resid_post"]]
    assert names.index("blocks.1.hook_resid_pre") == 11
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


@pytest.mark.parametrize("sampler", ["top-k", "top-p", "min-p"])
def test_sampling_defaults_are_the_clis(stories, sampler):
    # A sampler's unset arguments take the CLI's defaults (top_k 40, top_p 0.9, min_p 0.05), so the
    # same settings give the same tokens in both.
    prompt = "Once upon a time"
    r = stories.generate(prompt, max_new_tokens=30, sampler=sampler, seed=11, ignore_eos=True)
    out = cli("generate", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--dtype", "fp16", "--prompt", prompt,
              "--max-new-tokens", "30", "--sampler", sampler, "--seed", "11", "--ignore-eos", "--json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert r["sampler"] == j["sampler"]
    assert r["output_ids"] == j["output_ids"]


def test_arguments_are_checked_by_name(stories):
    ids = stories.tokenize("Once upon a time")
    # An argument the sampler ignores is refused, as the CLI refuses it.
    for kwargs, says in [({"temperature": 0.7}, "temperature=0.7 has no effect with sampler='greedy'"),
                         ({"seed": 3}, "seed=3 has no effect"),
                         ({"sampler": "temperature", "top_p": 0.5}, "top_p=0.5 has no effect"),
                         ({"sampler": "top-p", "top_k": 5}, "top_k=5 has no effect"),
                         ({"sampler": "top-k", "min_p": 0.1}, "min_p=0.1 has no effect"),
                         ({"sampler": "temperature", "temperature": -1}, "temperature=-1: expected"),
                         ({"sampler": "top-p", "top_p": 2}, r"top_p=2: expected a number in \(0, 1\]"),
                         ({"sampler": "top-k", "top_k": 0}, "top_k=0: expected 1 or more"),
                         ({"sampler": "top-p", "seed": -1}, r"seed=-1: expected 0 to 2\*\*64 - 1"),
                         ({"sampler": "top-p,top-k"}, "one sampler per call"),
                         ({"stop": [""]}, "stop: '' would match"),
                         ({"max_new_tokens": -1}, "max_new_tokens=-1")]:
        with pytest.raises(ValueError, match=says):
            stories.generate(ids, **kwargs)
    for kwargs, says in [({"prompt": 3.5}, r"prompt: expected a str or a list of token ids \(got float\)"),
                         ({"sampler": "temperature", "temperature": "hot"}, r"temperature: expected a number \(got str\)"),
                         ({"sampler": "top-k", "top_k": 2.5}, r"top_k: expected an int \(got float\)"),
                         ({"stop": ["ok", 5]}, r"stop\[1\]: expected a str \(got int\)")]:
        with pytest.raises(TypeError, match=says):
            stories.generate(**{"prompt": ids, **kwargs})
    # A single stop string is a list of one.
    r = stories.generate(ids, max_new_tokens=40, stop="Lily")
    assert r["stop_reason"] == "stop_string" and r["stop_string"] == "Lily"
    # Hook names: a name the model lacks is named, with what was probably meant.
    with pytest.raises(ValueError, match="did you mean 'blocks.0.hook_resid_post'"):
        stories.run_with_cache(ids, names=["blocks.0.hook_resid_posts"])
    with pytest.raises(ValueError, match=r"this model has 5 layers \(blocks.0 to blocks.4\)"):
        stories.run_with_cache(ids, names="blocks.5.hook_resid_post")
    with pytest.raises(TypeError, match=r"names: expected a hook name.*\(got int\)"):
        stories.run_with_cache(ids, names=5)
    _, one = stories.run_with_cache(ids, names="blocks.1.attn.hook_v")
    assert list(one) == ["blocks.1.attn.hook_v"]
    # A predicate's result counts by its truth, as filter() counts it.
    _, some = stories.run_with_cache(ids, names=lambda n: "yes" if n.endswith("hook_v") else "")
    assert sorted(some) == [f"blocks.{l}.attn.hook_v" for l in range(5)]
    # compare's options: a typo gets a suggestion, a wrong type names the option.
    with pytest.raises(ValueError, match="did you mean 'max_new_tokens'"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), max_new_token=2)
    with pytest.raises(TypeError, match=r"max_new_tokens: expected an int \(got str\)"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), max_new_tokens="2")
    with pytest.raises(TypeError, match=r"prompts\[1\]: expected a str \(got int\)"):
        kvparity.compare(shared(STORIES), ["a", 3], tokenizer=shared(TOK))
    with pytest.raises(ValueError, match="temperature=0.5 has no effect"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), temperature=0.5)
    with pytest.raises(kvparity.Error, match=r"no such prompts file.*pass prompts as a list, e.g. \['Tom had a ball'\]"):
        kvparity.compare(shared(STORIES), "Tom had a ball", tokenizer=shared(TOK))
    with pytest.raises(ValueError, match="needs at least two prompts"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), batch_size=2)
    with pytest.raises(ValueError, match="control='fp32' needs a half-precision"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), dtype="fp32", control="fp32")


def test_compare_takes_the_clis_study_options(tmp_path):
    prompts = ["Once upon a time", "The dog", "Lily and Ben"]
    s = kvparity.compare(shared(STORIES), prompts, tokenizer=shared(TOK), sampler=["greedy", "top-p"], top_p=0.8,
                         seed=4, control="fp32", max_new_tokens=6, out=str(tmp_path / "py"))
    # A list's prompts are prompt-0, prompt-1, ...: the ids that key their random draws.
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": f"prompt-{i}", "prompt": p}) + "\n"
                                              for i, p in enumerate(prompts)))
    out = cli("compare", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--prompts", str(tmp_path / "p.jsonl"),
              "--sampler", "greedy,top-p", "--top-p", "0.8", "--seed", "4", "--control", "fp32", "--max-new-tokens",
              "6", "--out", str(tmp_path / "cli"))
    assert out.returncode == 0, out.stderr
    c = json.load(open(tmp_path / "cli" / "summary.json"))
    assert [x["condition"] for x in s["conditions"]] == [x["condition"] for x in c["conditions"]]
    assert [x["condition"] for x in s["conditions"]] == [
        "fp16/kv=fp16/standard/greedy", "fp16/kv=fp16/standard/top-p(p=0.8,T=1)",
        "fp32/kv=fp32/standard/greedy/control", "fp32/kv=fp32/standard/top-p(p=0.8,T=1)/control"]
    py_rows = [json.loads(l) for l in open(tmp_path / "py" / "results.jsonl")]
    cli_rows = [json.loads(l) for l in open(tmp_path / "cli" / "results.jsonl")]
    def tokens(rows):
        return sorted((r["condition"], r["prompt"], r["on_ids"], r["off_ids"]) for r in rows)

    assert len(py_rows) == 4 * len(prompts)
    assert tokens(py_rows) == tokens(cli_rows)
    kvparity.compare(shared(STORIES), prompts, tokenizer=shared(TOK), limit=2, max_new_tokens=4,
                     out=str(tmp_path / "lim"))
    assert [json.loads(l)["prompt_id"] for l in open(tmp_path / "lim" / "results.jsonl")] == ["prompt-0", "prompt-1"]
    b = kvparity.compare(shared(STORIES), prompts, tokenizer=shared(TOK), batch_size=2, max_new_tokens=6)
    assert [x["condition"] for x in b["conditions"]] == ["fp16/kv=fp16/standard/cache=on/batch-size=1->2/greedy"]


def test_generate_batch_is_each_prompt_alone_with_invariant_kernels():
    m = kvparity.load(shared(STORIES), tokenizer=shared(TOK), dtype="fp16", kernels="invariant", threads=2)
    prompts = ["Once upon a time", "The dog ran", m.tokenize("Lily and Ben went to the park")]
    batch = m.generate_batch(prompts, max_new_tokens=24, return_logits=True, ignore_eos=True)
    assert [r["sequence"] for r in batch] == [0, 1, 2]
    for p, r in zip(prompts, batch):
        alone = m.generate(p, max_new_tokens=24, return_logits=True, ignore_eos=True)
        assert r["output_ids"] == alone["output_ids"] and r["text"] == alone["text"]
        assert np.array_equal(r["logits"], alone["logits"])  # bit for bit
    # The CLI's batch gives the same tokens.
    out = cli("generate", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--dtype", "fp16", "--kernels",
              "invariant", "--threads", "2", "--prompt", prompts[0], "--prompt", prompts[1], "--max-new-tokens", "24",
              "--ignore-eos", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines()]
    assert [r["output_ids"] for r in rows] == [r["output_ids"] for r in batch[:2]]
    with pytest.raises(TypeError, match=r"prompts: expected a list of prompts"):
        m.generate_batch("Once upon a time")
    with pytest.raises(TypeError, match=r"prompts\[1\]: expected a str or a list of token ids \(got float\)"):
        m.generate_batch(["a", 2.5])
    with pytest.raises(ValueError, match="prompts: give at least one prompt"):
        m.generate_batch([])


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


def test_compare_shards_merge_into_the_whole_study(tmp_path):
    def run(out, **kw):
        return kvparity.compare(shared(STORIES), "builtin:stories", tokenizer=shared(TOK), max_new_tokens=6,
                                sampler=["greedy", "top-p"], out=str(tmp_path / out), **kw)

    def sans_manifest(summary):
        return {k: v for k, v in summary.items() if k != "manifest"}

    whole = run("all")
    for i in range(3):
        run(f"s{i}", shard=f"{i}/3")
    merged = kvparity.merge([str(tmp_path / f"s{i}") for i in range(3)], str(tmp_path / "m"))
    assert sans_manifest(merged) == sans_manifest(whole)
    assert (tmp_path / "m" / "results.jsonl").read_bytes() == (tmp_path / "all" / "results.jsonl").read_bytes()
    part = kvparity.merge([str(tmp_path / "s0"), str(tmp_path / "s2")], str(tmp_path / "p"), report=False)
    assert part == {"kind": "compare", "records": 22, "duplicates": 0, "missing_shards": ["1/3"]}
    assert sans_manifest(run("p")) == sans_manifest(whole)  # the unsharded run completes the merge
    with pytest.raises(ValueError, match=r"shard='0/3' needs out="):
        kvparity.compare(shared(STORIES), ["a", "b"], tokenizer=shared(TOK), shard="0/3")
    with pytest.raises(ValueError, match=r"shard='3/3': need 0 <= i < n"):
        run("bad", shard="3/3")
    with pytest.raises(kvparity.Error, match="holds shard 0/3 but this run is shard 1/3"):
        run("s0", shard="1/3")
    with pytest.raises(TypeError, match=r"dirs: expected a list of the shards' folders \(got str\)"):
        kvparity.merge(str(tmp_path / "s0"), str(tmp_path / "m2"))
    with pytest.raises(kvparity.Error, match="merge into an empty directory"):
        kvparity.merge([str(tmp_path / "s0")], str(tmp_path / "s1"))

def test_eval_gsm8k_is_the_clis(tmp_path):
    data = shared("data/gsm8k/test.jsonl")
    py = kvparity.eval_gsm8k(data, shared(STORIES), out=str(tmp_path / "py"), shots=0, limit=4, max_new_tokens=8,
                             conditions=["greedy", "temperature:0.7"], seed=3, batch_size=2)
    out = cli("eval", "gsm8k", "--data", data, "--model", shared(STORIES), "--shots", "0", "--limit", "4",
              "--max-new-tokens", "8", "--conditions", "greedy,temperature:0.7", "--seed", "3", "--batch-size", "2",
              "--out", str(tmp_path / "cli"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "py" / "gsm8k.jsonl").read_bytes() == (tmp_path / "cli" / "gsm8k.jsonl").read_bytes()
    assert py == json.load(open(tmp_path / "cli" / "summary.json"))
    assert [r["condition"] for r in py["gsm8k"]["rows"]] == ["greedy", "temperature:0.7"]
    # The same settings as the CLI's: Python resumes the CLI's folder (nothing left to run).
    again = kvparity.eval_gsm8k(data, [shared(STORIES)], out=str(tmp_path / "cli"), shots=0, limit=4,
                                max_new_tokens=8, conditions="greedy,temperature:0.7", seed=3, batch_size=2)
    assert again == py
    with pytest.raises(ValueError, match="seed: greedy draws no random numbers"):
        kvparity.eval_gsm8k(data, shared(STORIES), shots=0, limit=1, seed=3)
    with pytest.raises(ValueError, match="tokenizer: give one per model"):
        kvparity.eval_gsm8k(data, [shared(STORIES)], tokenizer=["auto", "auto"], shots=0, limit=1)
    with pytest.raises(ValueError, match="did you mean 'max_new_tokens'"):
        kvparity.eval_gsm8k(data, shared(STORIES), max_new_token=8)
    with pytest.raises(ValueError, match=r"shard='1/2' needs out="):
        kvparity.eval_gsm8k(data, shared(STORIES), shard="1/2")
    with pytest.raises(kvparity.Error, match="holds shard"):
        kvparity.eval_gsm8k(data, shared(STORIES), out=str(tmp_path / "cli"), shots=0, limit=4, max_new_tokens=8,
                            conditions="greedy,temperature:0.7", seed=3, batch_size=2, shard="1/2")

def test_profile_and_patch_are_the_clis(tmp_path):
    prompt = "Tom had a red ball"
    prof = kvparity.profile(shared(STORIES), prompt, tokenizer=shared(TOK), dtype=["fp32", "fp16"], step=3,
                            out=str(tmp_path / "prof"))
    out = cli("profile", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--prompt", prompt, "--dtype",
              "fp32,fp16", "--step", "3", "--json")
    assert out.returncode == 0, out.stderr
    assert prof == json.loads(out.stdout)
    assert prof == json.load(open(tmp_path / "prof" / "profile.json"))
    assert [p["dtype"] for p in prof["profiles"]] == ["fp32", "fp16"]
    assert len(prof["profiles"][1]["layers"]) == 5
    # The same folder with other settings is refused before any work, as --out is.
    with pytest.raises(kvparity.Error, match="profile/settings/step: 3 vs 2"):
        kvparity.profile(shared(STORIES), prompt, tokenizer=shared(TOK), dtype=["fp32", "fp16"], step=2,
                         out=str(tmp_path / "prof"))
    pat = kvparity.patch(shared(STORIES), prompt, tokenizer=shared(TOK), max_new_tokens=64, kv_positions=(0, 4))
    out = cli("patch", "--model", shared(STORIES), "--tokenizer", shared(TOK), "--prompt", prompt,
              "--max-new-tokens", "64", "--kv-positions", "0:4", "--json")
    assert out.returncode == 0, out.stderr
    assert pat == json.loads(out.stdout)
    assert pat["first_divergence"] > 0 and pat["rows"]
    for call, kwargs, error, says in [
            (kvparity.profile, {"steps": 3}, ValueError, "did you mean 'step'"),
            (kvparity.profile, {"step": 0}, ValueError, "step=0: expected 1 or more"),
            (kvparity.profile, {"threads": "2"}, TypeError, r"threads: expected an int \(got str\)"),
            (kvparity.patch, {"kv_positions": (3, 3)}, ValueError, "kv_positions=\\(3, 3\\): expected"),
            (kvparity.patch, {"kv_positions": 3}, TypeError, "kv_positions: expected a \\(begin, end\\) pair"),
            (kvparity.patch, {"step": 100, "max_new_tokens": 50}, ValueError, "step=100 needs max_new_tokens > 100"),
            (kvparity.patch, {"temperature": 0.3}, ValueError, "temperature=0.3 has no effect")]:
        with pytest.raises(error, match=says):
            call(shared(STORIES), prompt, tokenizer=shared(TOK), **kwargs)


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
    # Text through another model's tokenizer: bad input (the CLI's exit 1), named as such.
    other = kvparity.load(shared(STORIES), tokenizer=shared("models/llama2-tokenizer/tokenizer.model"))
    with pytest.raises(kvparity.Error, match="prompt: token 9038 at position 1 has no embedding row.*tokenizer this"):
        other.generate("Once upon a time", max_new_tokens=2)
    with pytest.raises(ValueError, match="unknown option 'colour'"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), colour="red")
    with pytest.raises(ValueError, match="twice"):
        kvparity.compare(shared(STORIES), ["a"], tokenizer=shared(TOK), baseline="threads=1,threads=2")


def test_an_unusable_device_is_named_as_python_spells_it(tmp_path):
    # The CLI's wording is "--device cuda: ..."; from Python the keyword is device=.
    for call in (lambda: kvparity.load(shared(STORIES), tokenizer=shared(TOK), device="cuda"),
                 lambda: kvparity.profile(shared(STORIES), "Once upon a time", tokenizer=shared(TOK), device="cuda")):
        try:
            call()
        except kvparity.Error as e:
            assert str(e).startswith("device='cuda': "), str(e)
            assert "--device" not in str(e), str(e)
        else:
            pytest.skip("this machine has a usable GPU")

def test_a_signal_interrupts_generate_and_leaves_the_model_usable(stories):
    ids = stories.tokenize("Once upon a time")
    expected = stories.generate(ids, max_new_tokens=30, cache=False, ignore_eos=True)
    # Python's own Ctrl-C handler, whatever the runner left: a job started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Python then installs no handler at all.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # One call, seconds long (cache OFF over most of the context): the signal must stop it
            # from inside, between steps.
            stories.generate(ids, max_new_tokens=480, cache=False, ignore_eos=True)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert stories.generate(ids, max_new_tokens=30, cache=False, ignore_eos=True) == expected


def test_help_reads_well():
    assert "TransformerLens" in kvparity.Model.run_with_cache.__doc__
    assert "profile.json" in kvparity.profile.__doc__ and "patch.json" in kvparity.patch.__doc__
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
    # A synth preset from its shapes alone, nothing generated.
    q = kvparity.inspect(synth="qwen3-30b-a3b", cache_capacity=4096)
    assert q["family"] == "qwen3_moe" and q["parameters"]["total"] == 30532122624
    assert kvparity.inspect(synth="tiny", arch="olmoe")["family"] == "olmoe"
    for bad in (dict(), dict(model_path=shared(STORIES), synth="tiny"), dict(arch="olmoe")):
        with pytest.raises(ValueError):
            kvparity.inspect(**bad)
    with pytest.raises(ValueError, match="kv_dtype='fp7'"):
        kvparity.inspect(shared(STORIES), kv_dtype="fp7")
    with pytest.raises(kvparity.Error, match="no such file"):
        kvparity.inspect(str(tmp_path / "missing.gguf"))


GEMMA_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
                  "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
                  "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
                  "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
SPECIALS = ["<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>", "<|extra|>"]


def chat_model(tmp_path):
    """A tiny synthetic model whose tokenizer holds the chat formats' special tokens (ids 504-511) and
    whose tokenizer_config.json ships Gemma's template."""
    d = tmp_path / "chat"
    out = cli("synth", "--out", str(d))
    assert out.returncode == 0, out.stderr
    j = json.load(open(d / "tokenizer.json"))
    gone = {p for p, i in j["model"]["vocab"].items() if i >= 504}
    j["model"]["vocab"] = {p: i for p, i in j["model"]["vocab"].items() if i < 504}
    j["model"]["merges"] = [m for m in j["model"]["merges"] if "".join(m) not in gone]
    for k, piece in enumerate(SPECIALS):
        j["added_tokens"].append({"id": 504 + k, "content": piece, "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True})
    json.dump(j, open(d / "tokenizer.json", "w"))
    config = json.load(open(d / "tokenizer_config.json"))
    config["chat_template"] = GEMMA_TEMPLATE
    json.dump(config, open(d / "tokenizer_config.json", "w"))
    return str(d)


def test_chat_templates_lay_prompts_out_as_the_clis(tmp_path):
    d = chat_model(tmp_path)
    m = kvparity.load(d)
    assert m.config["more_eos_ids"] == []
    ids = m.apply_chat_template("the dog")
    assert ids[:2] == [m.config["bos_id"], 506] and ids.count(506) == 2 and ids.count(507) == 1
    last_turn = len(ids) - 1 - ids[::-1].index(506)
    assert m.detokenize(ids[last_turn + 1:]).strip() == "model"  # the assistant's turn opened
    assert m.apply_chat_template([{"role": "user", "content": "the dog"}], chat_template="gemma") == ids
    text = m.apply_chat_template("the dog", tokenize=False)
    assert text == "<s><start_of_turn>user\nthe dog<end_of_turn>\n<start_of_turn>model\n"
    assert m.tokenize(text, bos=False) == ids
    turns = m.apply_chat_template([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                   {"role": "user", "content": "c"}], chat_template="chatml")
    assert turns[0] == 504 and turns.count(504) == 5 and turns.count(505) == 4
    # generate: a str prompt is the user turn, as the CLI's --chat-template.
    r = m.generate("the dog", max_new_tokens=3, chat_template="auto")
    assert r["prompt_ids"] == ids
    out = cli("generate", "--model", d, "--prompt", "the dog", "--chat-template", "auto", "--max-new-tokens", "3",
              "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["output_ids"] == r["output_ids"]
    assert m.generate_batch(["the dog", "a cat"], max_new_tokens=3, chat_template="gemma")[0]["prompt_ids"] == ids
    # compare and eval_gsm8k pin the template they used.
    s = kvparity.compare(d, ["the dog"], chat_template="auto", max_new_tokens=3, out=str(tmp_path / "c"))
    assert s["conditions"]
    manifest = json.load(open(tmp_path / "c" / "manifest.json"))
    assert manifest["commands"]["compare"]["settings"]["chat_template"] == "gemma"
    p = kvparity.profile(d, "the dog", dtype="fp16", step=2, chat_template="gemma")
    assert p["profiles"] and p["prompt"] == "the dog"
    with pytest.raises(ValueError, match="chat_template='vicuna'"):
        kvparity.compare(d, ["the dog"], chat_template="vicuna")
    with pytest.raises(ValueError, match="messages\\[0\\]"):
        m.apply_chat_template([{"role": "user"}])
    with pytest.raises(TypeError, match="messages"):
        m.apply_chat_template(3)
    # A base model's tokenizer has no <|im_start|>: refused, naming the piece.
    with pytest.raises(kvparity.Error, match="im_start"):
        kvparity.load(shared(STORIES), tokenizer=shared(TOK)).apply_chat_template("hi", chat_template="chatml")
    # system=: a system message first, as --system; pinned in the results.
    brief = m.apply_chat_template([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the dog"}],
                                  chat_template="chatml")
    assert m.generate("the dog", max_new_tokens=1, chat_template="chatml", system="Be brief.")["prompt_ids"] == brief
    assert m.generate_batch(["the dog"], max_new_tokens=1, chat_template="chatml",
                            system="Be brief.")[0]["prompt_ids"] == brief
    kvparity.compare(d, ["the dog"], chat_template="chatml", system="Be brief.", max_new_tokens=2,
                     out=str(tmp_path / "s"))
    manifest = json.load(open(tmp_path / "s" / "manifest.json"))
    assert manifest["commands"]["compare"]["settings"]["chat_template"] == 'chatml (system message "Be brief.")'
    with pytest.raises(ValueError, match="system needs chat_template"):
        m.generate("the dog", max_new_tokens=1, system="Be brief.")
    with pytest.raises(ValueError, match="system: chat template gemma has no system message"):
        kvparity.profile(d, "the dog", dtype="fp16", chat_template="gemma", system="Be brief.")
    with pytest.raises(ValueError, match="system=''"):
        kvparity.patch(d, "the dog", chat_template="chatml", system="")
    with pytest.raises(TypeError, match="system"):
        m.generate("the dog", chat_template="chatml", system=3)
    # enable_thinking=False (transformers' argument, --no-thinking): only a template with the switch.
    with pytest.raises(ValueError, match="enable_thinking=False: chat template chatml has no thinking switch"):
        m.apply_chat_template("the dog", chat_template="chatml", enable_thinking=False)
    with pytest.raises(ValueError, match="enable_thinking=False needs chat_template"):
        m.generate("the dog", max_new_tokens=1, enable_thinking=False)
    with pytest.raises(ValueError, match="enable_thinking=False: chat template gemma"):
        kvparity.compare(d, ["the dog"], chat_template="gemma", enable_thinking=False, max_new_tokens=1)
    with pytest.raises(TypeError, match="enable_thinking"):
        m.apply_chat_template("the dog", chat_template="chatml", enable_thinking="no")
    assert m.apply_chat_template("the dog", chat_template="chatml", enable_thinking=True) == \
        m.apply_chat_template("the dog", chat_template="chatml")
