# names: the run-name vocabulary, the one definition of it on the Python side
# (docs/BENCHMARKS.md, "Run names"). A run is named
#   family/key:value/key:value/...
# with the keys in KEYS' order and values from VOCAB or PATTERNS. The C++ side
# (benchmarks/bench_common.cpp, RunName::keys) prints its keys with --sb_keys, and
# tests/bench_smoke.py checks them against KEYS; peers.py, results.py and the tables
# import from here. Standard library only.
import re

FAMILIES = ("baseline", "elementwise", "copy", "views", "reduce", "matmul", "conv",
            "quant", "alloc", "transfer", "peers")
KEYS = ("op", "impl", "device", "layout", "style", "dtype", "shape", "threads",
        "dim", "alloc", "step", "size")
# Ops of the views family (view, reshape, ...) and d2h are not in BENCHMARKS.md's op
# list yet; the Views vs copies and Host to device tables need them.
VIEW_OPS = ("view", "reshape", "transpose", "permute", "flatten", "slice", "select",
            "narrow", "expand", "squeeze", "unsqueeze", "as_strided", "clone",
            "contiguous")
VOCAB = {
    "op": ("add", "mul", "relu", "normalize", "contiguous", "nchw_to_nhwc", "sum",
           "matmul", "conv2d", "linear", "mlp", "alloc_free", "reuse_experiment",
           "h2d", "d2h", "copy", "scale", "triad", "read", "fma_peak", "gemm_peak",
           "d2d_copy", "add_inplace", "scale_inplace", "copy_nt", "add_nt",
           # in docs/BENCHMARKS.md's op row: reductions, pooling, the S3 chain
           "nhwc_to_nchw", "mean", "max", "var", "max_pool2d", "avg_pool2d",
           "loop",
           # the peers family (scripts/peers.py): one call's fixed cost from Python
           "overhead") + VIEW_OPS[:-1],
    "impl": ("ours", "torch", "numpy", "openblas", "cudnn", "im2col"),
    "layout": ("contiguous", "transposed", "sliced", "expanded", "channels_last",
               "column_major", "contiguous_first", "mixed_formats"),
    "style": ("inplace", "out", "outofplace", "outofplace_system", "view", "copy"),
    "dtype": ("f32", "tf32", "f64", "f16", "bf16", "i32", "i8", "int8_dynamic", "int8_static"),
    "dim": ("inner", "outer"),
    "alloc": ("caching", "system", "pinned", "pageable", "cudamalloc"),
}
PATTERNS = {"device": r"cpu|cuda:\d+", "shape": r"\d+(x\d+)*", "threads": r"\d+",
            "step": r"\d+", "size": r"\d+"}
# key:value segments that Google Benchmark itself appends; stripped like its other
# segments (manual_time, real_time, _median, bare Arg values).
GBENCH_KEYS = ("repeats", "iterations", "min_time", "min_warmup_time", "threads")


def parse_name(name):
    """'family/key:value/...' -> (family, {key: value}); ValueError when outside the
    vocabulary. Google Benchmark's own segments are stripped."""
    segs = name.split("/")
    family = segs[0]
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")
    keys, last = {}, -1
    for seg in segs[1:]:
        key, sep, value = seg.partition(":")
        if not sep:
            continue  # manual_time, real_time, bare Arg values
        if key not in KEYS:
            if key in GBENCH_KEYS:
                continue
            raise ValueError(f"unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in keys:
            if keys[key] == value:
                continue  # Google Benchmark's /threads:N repeating ours
            raise ValueError(f"key {key!r} appears twice")
        if key in VOCAB and value not in VOCAB[key]:
            raise ValueError(f"{key} {value!r} is not in the vocabulary "
                             f"({', '.join(VOCAB[key])})")
        if key in PATTERNS and not re.fullmatch(PATTERNS[key], value):
            raise ValueError(f"{key} {value!r} is malformed")
        if KEYS.index(key) < last:
            raise ValueError(f"key {key!r} out of order (order: {', '.join(KEYS)})")
        last = KEYS.index(key)
        keys[key] = value
    for key in ("op", "device"):
        if key not in keys:
            raise ValueError(f"no {key}:<{key}> segment")
    return family, keys


def canonical(family, keys):
    return "/".join([family] + [f"{k}:{keys[k]}" for k in KEYS if k in keys])


def shape_numel(shape):
    n = 1
    for d in (shape or "0").split("x"):
        n *= int(d)
    return n


def order_key(key, value):
    """How values of a key sort in tables: the vocabulary's order, shapes by size, counts
    numerically, cpu before the GPUs."""
    if value is None:
        return (0,)
    if key in VOCAB and value in VOCAB[key]:
        return (1, VOCAB[key].index(value), "")
    if key == "shape":
        return (1, shape_numel(value), tuple(int(d) for d in value.split("x")))
    if key in ("threads", "step", "size"):
        return (1, int(value), "")
    return (1, 0 if value == "cpu" else 1, value)
