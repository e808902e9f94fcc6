"""Cache ON vs cache OFF on stories260K in fp16: where the two paths' logits part, and in which
layer the difference is born. Writes a two-panel PNG.

    PYTHONPATH=build/python python3 examples/divergence_plot.py [--shared ../shared] [--out divergence.png]
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

import kvparity

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--shared", default=os.environ.get("KVPARITY_SHARED", "../shared"))
parser.add_argument("--out", default="divergence.png")
parser.add_argument("--prompt", default="Tom had a red ball")
parser.add_argument("--tokens", type=int, default=200)
args = parser.parse_args()

stories = os.path.join(args.shared, "models/stories260K")
m = kvparity.load(os.path.join(stories, "stories260K.bin"), tokenizer=os.path.join(stories, "tok512.bin"),
                  dtype="fp16", threads=1)

# 1. Both paths free-running from the same seeded draws, with every step's logits.
on = m.generate(args.prompt, max_new_tokens=args.tokens, cache=True, return_logits=True, ignore_eos=True)
off = m.generate(args.prompt, max_new_tokens=args.tokens, cache=False, return_logits=True, ignore_eos=True)
steps = min(len(on["output_ids"]), len(off["output_ids"]))
parted = next((s for s in range(steps) if on["output_ids"][s] != off["output_ids"][s]), None)
# Until the paths choose different tokens their prefixes are the same, so their logits are comparable.
shared_steps = steps if parted is None else parted + 1
dlogit = np.max(np.abs(on["logits"][:shared_steps] - off["logits"][:shared_steps]), axis=1)

# 2. At the last shared step, the residual stream after each layer on both paths: cache ON prefills
# the prompt and decodes the rest one token at a time; cache OFF recomputes everything in one pass.
prompt = on["prompt_ids"]
ids = prompt + on["output_ids"][: shared_steps - 1]
names = [f"blocks.{l}.hook_resid_post" for l in range(m.config["n_layers"])]
_, acts_on = m.run_with_cache(ids, names=names, cache=True, prefill=len(prompt))
_, acts_off = m.run_with_cache(ids, names=names)
per_layer = [np.max(np.abs(acts_on[n][-1] - acts_off[n][-1])) for n in names]

fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
a.semilogy(np.arange(shared_steps), np.maximum(dlogit, 1e-8), marker=".", lw=1)
a.set_xlabel("generated token")
a.set_ylabel("max |logit ON − logit OFF| (zeros drawn at 1e-8)")
title = "fp16, stories260K: " + (f"paths part at token {parted}" if parted is not None else f"no divergence in {steps}")
a.set_title(title)
if parted is not None:
    a.axvline(parted, color="red", ls="--", lw=1)
b.semilogy(range(len(per_layer)), np.maximum(per_layer, 1e-8), marker="o")
b.set_xlabel("layer")
b.set_ylabel("max |resid_post ON − OFF|")
b.set_xticks(range(len(per_layer)))
b.set_title(f"where it is born (position {len(ids) - 1})")
fig.tight_layout()
fig.savefig(args.out, dpi=110)
print(f"wrote {args.out}: first divergence {parted}, max |Δlogit| up to it {dlogit.max():.3g}")
