"""PyTorch parity: the cases torch_parity_dump ran through the library, run again
through the PyTorch installed here, compared (Note [PyTorch parity] in
tests/torch_parity.cpp).

Usage: torch_parity.py DUMP_EXECUTABLE [--cuda] [--quick] [--keep DIR] [-v]

Per case: both raised, or neither; then the result's dtype and sizes exactly, its
strides where a dim has more than one element (PyTorch's layout rules), and its values:
bit for bit where both sides do one rounded float32 (or float64) operation per element
(the elementwise ops but exp, max, copies and conversions), NaN matching NaN whatever
its payload (LIBRARY.md, bfloat16); within a tolerance of the dtype where the two sum
in different orders (reductions, normalize, matmul, conv2d, avg_pool2d) or use other
exp approximations. For out= and in place, the whole storage written into is compared,
so an element outside the view that either side touched shows too.

Where this PyTorch has no kernel for a 16-bit dtype ("not implemented for 'Half'"), its
op runs on the inputs widened to float32 and the result is rounded to the dtype, which
is what later PyTorch versions define; such cases are counted apart.

Exit status: 0 all agree, 1 some differ, 77 (Meson's skip) when torch does not import.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"torch_parity: skipped, PyTorch does not import here ({e})")
    sys.exit(77)

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i8": torch.int8, "i32": torch.int32, "i64": torch.int64}
FLOAT16 = (torch.float16, torch.bfloat16)

# Ops whose every element is one correctly rounded operation on both sides (in float32
# for the 16-bit dtypes, rounded once): compared bit for bit.
EXACT = {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "relu", "sqrt", "max", "max_pool2d", "to",
         "copy_", "contiguous", "contiguous_cl", "clone", "view", "reshape", "flatten", "permute", "transpose", "slice",
         "select", "narrow", "unsqueeze", "unflatten", "expand", "squeeze"}
# Relative tolerance per result dtype where the two sides sum in other orders: about two
# units in the last place of a 16-bit result, many more for float32 and float64 sums.
TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def stored(blob, where, dtype):
    """A writable flat tensor holding a copy of the bytes at where ({"at", "n"})."""
    raw = bytearray(blob[where["at"]:where["at"] + where["n"]])
    return torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)


def tensors_of(case, blob):
    """The case's inputs as PyTorch views of copies of their storages, and those flat
    copies by storage id (inputs that share a storage share it here too)."""
    flats, views = {}, []
    for t in case["inputs"]:
        sid = str(t["sid"])
        if sid not in flats:
            flats[sid] = stored(blob, case["storages"][sid], DTYPES[t["dtype"]])
        views.append(flats[sid].as_strided(t["sizes"], t["strides"], t["offset"]))
    return views, flats


def storage_ptr(t):
    """The address of t's storage (untyped_storage from PyTorch 2, where storage() warns)."""
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()


def scalar_for(case, x):
    s = case["params"]["scalar"]
    return int(s) if not x.is_floating_point() else s


def run_torch(case, ins):
    """Runs the case's op on ins in its style; returns the result (out-of-place) or the
    written tensor."""
    op, style, p = case["op"], case["style"], case["params"]
    if op in ("add", "sub", "mul", "div", "maximum", "minimum"):
        fn = getattr(torch, op)
        if style == "outofplace":
            return fn(ins[0], scalar_for(case, ins[0]) if "scalar" in p else ins[1])
        if style == "out":
            return fn(ins[1], scalar_for(case, ins[1]) if "scalar" in p else ins[2], out=ins[0])
        if op in ("maximum", "minimum"):  # no maximum_ in PyTorch: out= into self, with an in-place op's shape rule
            if torch.broadcast_shapes(ins[0].shape, ins[1].shape) != ins[0].shape:
                raise RuntimeError(f"output with shape {list(ins[0].shape)} doesn't match the broadcast shape")
            return fn(ins[0], ins[1], out=ins[0])
        return getattr(ins[0], op + "_")(ins[1])
    if op in ("neg", "abs", "relu", "exp", "sqrt"):
        fn = getattr(torch, op)
        if style == "outofplace":
            return fn(ins[0])
        if style == "out":
            if op == "relu":  # torch.relu takes no out=: clamp_min(x, 0) is its definition
                return torch.clamp_min(ins[1], 0, out=ins[0])
            return fn(ins[1], out=ins[0])
        return getattr(ins[0], op + "_")()
    if op == "normalize":
        x = ins[-1]
        r = F.layer_norm(x, [x.shape[-1]], eps=p["eps"])
        if style in ("out", "inplace"):  # normalize_out and normalize_: the same values written there
            return ins[0].copy_(r)
        return r
    if op in ("sum", "mean", "var", "std", "max"):
        x, dims, keep = ins[-1], p["dims"], p["keepdim"]
        if style == "out":  # PyTorch's out= of a reduction over given dims
            fn = torch.amax if op == "max" else getattr(torch, op)
            return fn(x, dims, keepdim=keep, out=ins[0])
        dims = dims or list(range(x.dim()))  # no dims: all of them, as ours
        if op == "max":
            return torch.amax(x, dims, keep) if dims else x.clone()
        if not dims:  # a 0-dim x: PyTorch takes no dim list for it
            return getattr(torch, op)(x, unbiased=p["correction"] == 1) if op in ("var", "std") else getattr(torch, op)(x)
        if op in ("var", "std"):
            return getattr(torch, op)(x, dims, unbiased=p["correction"] == 1, keepdim=keep)
        return getattr(torch, op)(x, dims, keepdim=keep)
    if op == "matmul":
        if style == "out":
            return torch.matmul(ins[1], ins[2], out=ins[0])
        return torch.matmul(ins[0], ins[1])
    if op == "linear":  # x, weight, bias: the 16-bit layers round the weight and bias to x's dtype
        x, wt = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        if p["precision"] != "f32":
            wt = wt.to(x.dtype)
            bias = bias.to(x.dtype) if bias is not None else None
        r = F.linear(x, wt, bias)
        return torch.relu(r) if p["relu"] else r
    if op == "conv2d":  # out=: PyTorch's conv2d has none, the result copied into out
        x = ins[1:] if style == "out" else ins
        bias = x[2] if len(x) > 2 else None
        r = F.conv2d(x[0], x[1], bias, int(p["stride"]), int(p["padding"]), int(p["dilation"]), int(p["groups"]))
        r = torch.relu(r) if p["relu"] else r
        return ins[0].copy_(r) if style == "out" else r
    if op in ("max_pool2d", "avg_pool2d"):
        r = getattr(F, op)(ins[-1], int(p["kernel"]), int(p["stride"]), int(p["padding"]))
        return ins[0].copy_(r) if style == "out" else r
    if op == "arange":  # integral arguments as Python ints, as a caller of PyTorch writes them
        args = [int(v) if float(v).is_integer() and DTYPES[p["dtype"]] == torch.int32 else v
                for v in (p["start"], p["end"], p["step"])]
        return torch.arange(*args, dtype=DTYPES[p["dtype"]])
    if "args" in p:  # a view op (or contiguous() or to()), as the tensor method of that name
        args = p["args"]
        if op == "slice":
            dim, start, end, step = args
            index = [slice(None)] * ins[0].dim()
            index[dim] = slice(start, end, step)
            return ins[0][tuple(index)]
        if op == "to":
            return ins[0].to(DTYPES[args[0]])
        return getattr(ins[0], op)(*args)
    if op == "to":
        return ins[0].to(DTYPES[p["dtype"]])
    if op == "copy_":
        return ins[0].copy_(ins[1])
    if op == "contiguous":
        return ins[0].contiguous()
    if op == "contiguous_cl":
        return ins[0].contiguous(memory_format=torch.channels_last)
    if op == "clone":
        return ins[0].clone()
    raise ValueError(f"no PyTorch form for op {op}")


def run_torch_widened(case, ins):
    """As run_torch, on float32 copies of the 16-bit inputs; the result rounded to their
    dtype (written into the case's out or self for out= and in place)."""
    dt = next(t.dtype for t in ins if t.dtype in FLOAT16)
    wide = [t.float() if t.dtype in FLOAT16 else t for t in ins]
    if case["op"] == "linear":  # the weight and bias rounded to the layer's dtype, then widened
        wide = [wide[0]] + [t.to(dt).float() for t in wide[1:]]
        case = dict(case, params=dict(case["params"], precision="f32"))
    if case["style"] == "outofplace":
        r = run_torch(case, wide)
        return r.to(dt) if r.is_floating_point() else r
    r = run_torch(case, wide)
    return ins[0].copy_(r)


def not_implemented(e):
    m = str(e)
    return "not implemented for 'Half'" in m or "not implemented for 'BFloat16'" in m or \
        "Unsupported dtype" in m or ("not supported" in m and ("Half" in m or "BFloat16" in m))


def strides_agree(sizes, a, b):
    return all(s <= 1 or x == y for s, x, y in zip(sizes, a, b))


# Where we differ from PyTorch on purpose (docs/LIBRARY.md, "Where we differ from
# PyTorch"); each case that meets one is compared the way its entry says and counted
# under its name.
def scalar16(case):
    """A 16-bit tensor with a scalar: the scalar enters the float32 arithmetic as it is;
    PyTorch 1.13's CPU kernels round it to the tensor's dtype first."""
    return "scalar" in case["params"] and case["inputs"][-1]["dtype"] in ("f16", "bf16")


def int_sum(case):
    """sum of int32 keeps int32 (no type promotion); PyTorch's gives int64."""
    return case["op"] == "sum" and case["inputs"][0]["dtype"] == "i32"


def normalize_layout(case):
    """normalize's result takes x's layout, as the elementwise ops' results do; PyTorch's
    layer_norm returns a contiguous tensor."""
    return case["op"] == "normalize" and case["style"] == "outofplace"


BF16_MIN_NORMAL = 2.0 ** -126


def values_agree(op, ours, ref):
    """None if ours equals ref (both any dtype, same shape) under the op's rule, else a
    description of the worst element."""
    if ours.numel() == 0:
        return None
    if not ours.is_floating_point():
        bad = (ours != ref).nonzero()
        return None if bad.numel() == 0 else f"element {bad[0].tolist()}: {ours[tuple(bad[0])].item()} vs {ref[tuple(bad[0])].item()}"
    o, r = ours.double(), ref.double()
    both_nan = torch.isnan(o) & torch.isnan(r)
    if op in EXACT:
        same = (o == r) | both_nan
        # the sign of a zero is part of the value
        same &= ~((o == 0) & (r == 0) & (torch.signbit(o) != torch.signbit(r)))
        if ours.dtype == torch.bfloat16:  # vcvtneps2bf16 flushes subnormals (LIBRARY.md, bfloat16)
            same |= (o == 0) & (r.abs() < BF16_MIN_NORMAL)
        if bool(same.all()):
            return None
        i = (~same).nonzero()[0]
        return f"element {i.tolist()}: {o[tuple(i)].item()!r} vs {r[tuple(i)].item()!r} (bit for bit)"
    tol = TOL[ours.dtype]
    finite = torch.isfinite(r)
    scale = r[finite].abs().max().item() if bool(finite.any()) else 1.0
    inf_ok = (o == r) & ~finite
    err = (o - r).abs()
    ok = both_nan | inf_ok | (err <= tol * r.abs() + tol * scale)
    if bool(ok.all()):
        return None
    i = (~ok).nonzero()[0]
    return f"element {i.tolist()}: {o[tuple(i)].item()!r} vs {r[tuple(i)].item()!r} (rtol {tol} of the value and of {scale:.3g})"


def check(case, blob):
    """(kind, message): kind 'ok', 'ok-widened', 'both-raised', 'differ', or the name of
    the documented difference the case was compared under."""
    ins, flats = tensors_of(case, blob)
    widened = False
    documented = None
    if scalar16(case):  # the layout from PyTorch's own op, the values from the scalar unrounded
        documented = "scalar16"
        try:
            layout = run_torch(case, tensors_of(case, blob)[0])
        except (RuntimeError, NotImplementedError):
            layout = None
        ins, flats = tensors_of(case, blob)
        try:
            ref = run_torch_widened(case, ins)
            torch_error = None
        except (RuntimeError, ValueError, IndexError, TypeError) as e:
            torch_error = str(e).splitlines()[0]
        return compare(case, blob, ins, flats, ref if torch_error is None else None, torch_error, documented,
                       layout)
    try:
        try:
            ref = run_torch(case, ins)
        except (RuntimeError, NotImplementedError) as e:
            if not not_implemented(e):
                raise
            ins, flats = tensors_of(case, blob)  # nothing written: start from the dumped state
            ref = run_torch_widened(case, ins)
            widened = True
        torch_error = None
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        torch_error = str(e).splitlines()[0]
        ref = None
    kind, why = compare(case, blob, ins, flats, ref, torch_error, documented, None)
    return ("ok-widened" if widened and kind == "ok" else kind), why


def compare(case, blob, ins, flats, ref, torch_error, documented, layout):
    ours_error = case.get("error")
    if ours_error:  # a refused call leaves every tensor as it was (README, Errors)
        for sid, where in case.get("kept", {}).items():
            if blob[where["at"]:where["at"] + where["n"]] != blob[case["storages"][sid]["at"]:
                                                                 case["storages"][sid]["at"] + case["storages"][sid]["n"]]:
                return "differ", f"ours raised ({ours_error}) but changed input storage {sid} first"
    if ours_error and torch_error:
        return "both-raised", ""
    if ours_error:
        return "differ", f"ours raised, PyTorch did not: {ours_error}"
    if torch_error:
        return "differ", f"PyTorch raised, ours did not: {torch_error}"
    if case["style"] == "outofplace":
        res = case["result"]
        shape_ref = layout if layout is not None else ref
        if int_sum(case) and res["dtype"] == "i32" and shape_ref.dtype == torch.int64:
            documented = "int-sum"
            ref = ref.to(torch.int32)
        elif DTYPES[res["dtype"]] != shape_ref.dtype:
            return "differ", f"dtype {res['dtype']} vs PyTorch's {shape_ref.dtype}"
        if list(res["sizes"]) != list(shape_ref.shape):
            return "differ", f"sizes {res['sizes']} vs PyTorch's {list(shape_ref.shape)}"
        if not strides_agree(res["sizes"], res["strides"], shape_ref.stride()):
            if not normalize_layout(case):
                return "differ", f"strides {res['strides']} vs PyTorch's {list(shape_ref.stride())} (sizes {res['sizes']})"
            documented = "normalize-layout"
        # (a zero-size tensor's storage has no address to compare)
        theirs_shares = bool(ins) and ref.numel() > 0 and storage_ptr(ref) == storage_ptr(ins[0])
        if ref.numel() > 0 and res["shares"] != theirs_shares:
            return "differ", (f"ours {'is a view of' if res['shares'] else 'is new memory, not a view of'} the input, "
                              f"PyTorch's {'is' if theirs_shares else 'is not'}")
        if res["shares"] and res["offset"] != ref.storage_offset():
            return "differ", f"storage offset {res['offset']} vs PyTorch's {ref.storage_offset()}"
        ours = stored(blob, res["storage"], ref.dtype).as_strided(res["sizes"], res["strides"], res["offset"])
        why = values_agree(case["op"], ours, ref)
    else:
        t0 = case["inputs"][0]
        flat = flats[str(t0["sid"])]
        ours = stored(blob, case["after"], flat.dtype)
        why = values_agree(case["op"], ours, flat)
        if why:
            why = "the written storage, " + why
    if why:
        return "differ", why
    return documented or "ok", ""


# The SIMD levels and kernel choices the dump runs at, each its own pass of every case;
# then the operands staged on copies (Note [Staged parity runs]): on new CPU storage
# always, on the GPU with --cuda.
LEVELS = [("default", {}), ("amx=0", {"SB_TUNING": "amx=0"}), ("avx2", {"SB_SIMD": "avx2"}),
          ("scalar", {"SB_SIMD": "scalar"}), ("staged", {"SB_PARITY_DEVICE": "cpu-staged"})]
CUDA_LEVEL = ("cuda", {"SB_PARITY_DEVICE": "cuda"})


def load(dump, out, env, wrapper=()):
    """The dump's cases and storages, or None where it found no device (exit 77)."""
    os.makedirs(out, exist_ok=True)
    p = subprocess.run([*wrapper, dump, out], stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    if p.returncode == 77:
        print(p.stdout.strip())
        return None
    p.check_returncode()
    with open(os.path.join(out, "storages.bin"), "rb") as f:
        blob = f.read()
    with open(os.path.join(out, "cases.jsonl")) as f:
        return [json.loads(line) for line in f], blob


def first(cases, pred):
    return next(c for c in cases if pred(c))


def self_check(cases, blob):
    """The checker must fail on a result that is wrong: each mutation of a case that
    agrees has to come back 'differ'. Returns the mutations it missed."""
    missed = []

    def expect_differ(what, case, data):
        kind, _ = check(case, bytes(data))
        if kind != "differ":
            missed.append(f"{what}: came back {kind}")

    def flip_low_bit(case, data, where):
        data[where["at"]] ^= 1  # the first element's lowest byte (little-endian)

    c = first(cases, lambda c: c["name"] == "add/f32/c[5,7],c[5,7]")
    d = bytearray(blob)
    flip_low_bit(c, d, c["result"]["storage"])
    expect_differ("one ulp off in an exact op", c, d)
    c = first(cases, lambda c: c["name"] == "sum/f32/c[4,5,6]/dims[1]")
    d = bytearray(blob)
    d[c["result"]["storage"]["at"] + 3] ^= 0x08  # a change in the exponent's last bit: a factor of 2
    expect_differ("a sum off by a factor", c, d)
    c = json.loads(json.dumps(first(cases, lambda c: c["name"] == "relu/f32/c[6,9]")))
    c["result"]["strides"] = [1, 6]
    expect_differ("a result in the other layout", c, blob)
    c = json.loads(json.dumps(first(cases, lambda c: c["name"] == "add/f32/c[5,7],c[5,7]")))
    c["result"]["dtype"] = "i32"
    expect_differ("a result of another dtype", c, blob)
    c = json.loads(json.dumps(first(cases, lambda c: c["name"] == "view/reshape[[6, 20]]/c[2,3,4,5]")))
    c["result"]["shares"] = False
    expect_differ("a copy where PyTorch gives a view", c, blob)
    c = json.loads(json.dumps(first(cases, lambda c: c["name"] == "add/f32/c[5,7],c[5,7]")))
    c["error"] = "made up"
    expect_differ("an error PyTorch does not raise", c, blob)
    c = first(cases, lambda c: c["name"] == "error/relu_out/expanded")
    d = bytearray(blob)
    d[c["kept"]["0"]["at"]] ^= 1
    expect_differ("a refused call that wrote into its out", c, d)
    c = first(cases, lambda c: c["name"].startswith("relu/f32/s[6,9]/out:t"))
    d = bytearray(blob)
    d[c["after"]["at"] + c["after"]["n"] - 1] ^= 0x40  # the storage's last element: past the view
    expect_differ("an element outside the out= view written", c, d)
    return missed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump", help="the torch_parity_dump executable")
    ap.add_argument("--keep", help="write the dump here and keep it")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--cuda", action="store_true", help="also run the table on the GPU (cuda:0)")
    ap.add_argument("--quick", action="store_true",
                    help="the default and staged passes only (a sanitizer build, or one without SIMD)")
    ap.add_argument("--exe-wrapper", action="append", default=[],
                    help="run the dump under this program (repeat for its arguments: a build for another CPU)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    documented = {"scalar16": "16-bit tensor-scalar ops with the scalar unrounded",
                  "int-sum": "int32 sums kept int32",
                  "normalize-layout": "normalize results in x's layout"}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        levels = [lv for lv in LEVELS if not args.quick or lv[0] in ("default", "staged")]
        for level, env in levels + ([CUDA_LEVEL] if args.cuda else []):
            loaded = load(args.dump, os.path.join(args.keep or tmp, level), env, args.exe_wrapper)
            if loaded is None:
                continue
            cases, blob = loaded
            if level == "default":
                missed = self_check(cases, blob)
                for m in missed:
                    print(f"SELF-CHECK the checker missed {m}")
                bad += len(missed)
            counts, failures = {}, []
            for case in cases:
                kind, why = check(case, blob)
                counts[kind] = counts.get(kind, 0) + 1
                if kind == "differ":
                    failures.append((case["name"], case["style"], why))
                elif args.verbose:
                    print(f"{level:8} {kind:16} {case['name']}")
            for name, style, why in failures:
                print(f"DIFFER [{level}] {name} [{style}]: {why}")
            bad += len(failures)
            print(f"torch_parity [{level}{' ' + ' '.join(f'{k}={v}' for k, v in env.items()) if env else ''}]: "
                  f"{len(cases)} cases against PyTorch {torch.__version__}: "
                  f"{counts.get('ok', 0)} agree, {counts.get('ok-widened', 0)} agree with PyTorch's op on float32 "
                  f"(no 16-bit kernel in this PyTorch), {counts.get('both-raised', 0)} raised on both sides, "
                  + "".join(f"{counts.get(k, 0)} agree but for a documented difference ({v}), "
                            for k, v in documented.items())
                  + f"{len(failures)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
