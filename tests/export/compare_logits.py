"""Checks for `tessera export` / `tessera import` against python/tessera_unet.py.

Run with a Python that has PyTorch (Debian's /usr/bin/python3 + python3-torch); the module
folder comes from $TESSERA_PYTHON. Subcommands (exit 1 with a message on failure):

  check MODEL_PT MODEL_JSON IN_PT OUT_PT
      Tessera's logits OUT on input IN equal the Python network's within 1e-4, and the
      check is sensitive: perturbing one weight by 1e-3 moves the logits beyond 1e-4.
  tune MODEL_PT MODEL_JSON IN_PT TUNED_PT PY_OUT_PT {ordered|plain}
      Changes some weights and buffers, saves the state_dict (as returned, an OrderedDict,
      or as a plain dict), saves the Python logits on IN; the change must move the logits.
  roundtrip TUNED_PT BACK_PT IN_PT IN2_PT PY_OUT_PT OUT2_PT
      After import and re-export: the weights came back identical, the example input is
      the same, and Tessera's logits OUT2 equal Python's PY_OUT within 1e-4.
  broken MODEL_PT OUT_DIR        writes weights files that import must refuse
"""
import os
import sys

import torch

sys.path.insert(0, os.environ["TESSERA_PYTHON"])
import tessera_unet  # noqa: E402

TOL = 1e-4


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def max_abs(a, b):
    if a.shape != b.shape:
        fail(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    return (a.double() - b.double()).abs().max().item()


def run(net, x):
    with torch.no_grad():
        return net(x)


def check(model_pt, model_json, in_pt, out_pt):
    net = tessera_unet.load(model_pt, model_json)
    x, want = torch.load(in_pt), torch.load(out_pt)
    got = run(net, x)
    d = max_abs(got, want)
    spread = want.std().item()
    print(f"{os.path.basename(model_json)}: input {tuple(x.shape)} -> logits {tuple(got.shape)}, "
          f"max |dlogit| = {d:.3g} (logit std {spread:.3g})")
    if not spread > 1e-3:
        fail("Tessera's logits are (nearly) constant: the comparison would prove nothing")
    if not d <= TOL:
        fail(f"max |dlogit| {d:.3g} > {TOL}")
    # The same comparison must notice a small change of one weight deep inside the network.
    w = net.enc0.conv0.weight
    with torch.no_grad():
        w[0].add_(1e-3 * torch.sign(w[0]) + 1e-3 * (w[0] == 0))
    d_bad = max_abs(run(net, x), want)
    if not d_bad > TOL:
        fail(f"perturbing enc0.conv0.weight[0] by 1e-3 changed the logits by only {d_bad:.3g}: check not sensitive")
    print(f"  control: perturbed enc0.conv0.weight[0] by 1e-3 -> max |dlogit| = {d_bad:.3g} (> {TOL})")


def tune(model_pt, model_json, in_pt, tuned_pt, py_out_pt, how):
    net = tessera_unet.load(model_pt, model_json)
    x = torch.load(in_pt)
    before = run(net, x)
    with torch.no_grad():
        net.head.weight.mul_(1.5)
        net.enc0.conv0.bias.add_(0.05)
        l = net.spec.levels - 2
        getattr(net, f"dec{l}").conv0.weight.mul_(0.8)
        norm = getattr(net.enc1, "norm0", None)
        if norm is not None and hasattr(norm, "running_var"):
            norm.running_var.mul_(2.0)
            norm.running_mean.add_(0.1)
        elif norm is not None:
            norm.weight.mul_(1.25)
    after = run(net, x)
    moved = max_abs(after, before)
    print(f"  tuned weights move the logits by up to {moved:.3g}")
    if not moved > 1e-2:
        fail("the weight change does not change the logits: round trip would prove nothing")
    state = net.state_dict()
    if how == "plain":
        state = dict(state)
    torch.save(state, tuned_pt)
    torch.save(after, py_out_pt)
    print(f"  saved {tuned_pt} as {type(state).__name__}")


def same_logits(a_pt, b_pt):
    d = max_abs(torch.load(a_pt), torch.load(b_pt))
    print(f"  {os.path.basename(a_pt)} vs {os.path.basename(b_pt)}: max |d| = {d:.3g}")
    if not d <= TOL:
        fail(f"max |d| {d:.3g} > {TOL}")


def same_weights(a_pt, b_pt):
    a, b = torch.load(a_pt), torch.load(b_pt)
    if sorted(a) != sorted(b):
        fail(f"names differ: {sorted(set(a) ^ set(b))[:5]}")
    for k in a:
        if a[k].shape != b[k].shape or not torch.equal(a[k], b[k]):
            fail(f"{k} differs")
    print(f"  {len(a)} tensors identical")


def roundtrip(tuned_pt, back_pt, in_pt, in2_pt, py_out_pt, out2_pt):
    same_weights(tuned_pt, back_pt)
    same_logits(in_pt, in2_pt)
    same_logits(py_out_pt, out2_pt)


def broken(model_pt, out_dir):
    state = dict(torch.load(model_pt))
    wrong = dict(state)
    w = wrong["head.weight"]
    wrong["head.weight"] = torch.zeros((w.shape[0] + 1,) + tuple(w.shape[1:]))
    torch.save(wrong, os.path.join(out_dir, "wrong_shape.pt"))
    missing = dict(state)
    del missing["dec0.conv1.bias"]
    torch.save(missing, os.path.join(out_dir, "missing.pt"))
    extra = dict(state)
    extra["enc0.norm9.num_batches_tracked"] = torch.tensor(3)
    torch.save(extra, os.path.join(out_dir, "extra.pt"))
    torch.save(w, os.path.join(out_dir, "tensor.pt"))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"check": check, "tune": tune, "roundtrip": roundtrip, "broken": broken}[cmd](*args)
