# peers/cases.py — our cases (read from our binaries) and their peer twins: elementwise,
# copy, reduce, matmul, conv, quant (with the CPU facts and torch's linear layers it
# needs). Part of stridebench.peers (its __init__ says what the peer runner does).
import concurrent.futures
import json
import os
import subprocess

from .. import results as sbtables  # loading and checking what the tables accept
from .common import GB_LIST_TIMEOUT, KEY_ORDER, shape_key
from .timing import Case, Skip, Work
from .backends import distinct_bytes, numel, pooled, span_bytes

# ---------------------------------------------------------------- the cases
# Note [Cases from our binaries]: the peers run the cases our benchmark binaries
# register (their --benchmark_list_tests at the same --sb_matrix; the run name says
# everything a case is, by the naming contract of docs/BENCHMARKS.md), each rebuilt in
# torch or NumPy by its family's builder below from the name's keys. A case a family
# gains in C++ is measured by the peers with no edit here; a builder returns None for
# what the library cannot do the same way (a style it has no form for, a dtype it has
# no kernel for), and those cases are listed, not measured. At --matrix quick the
# peers' 2.5-minute budget takes the subset QUICK selects.

# The peers' quick budget: regexes on our run names (impl:ours), any of which selects.
QUICK = (
    r"^elementwise/op:(add|mul|relu|normalize|loop)/.*/layout:contiguous/.*/shape:1x16x64x64/",
    r"^elementwise/op:add/.*/style:out/dtype:f32/shape:1x16x64x64/",
    r"^elementwise/op:add/.*/layout:contiguous/.*/shape:64x64x128x128/threads:1$",
    r"^elementwise/op:add/.*/layout:(contiguous|transposed|mixed_formats)/style:out/.*/shape:64x64x128x128/",
    r"^elementwise/op:relu/.*/layout:mixed_formats/style:out/",
    r"^copy/", r"^reduce/op:sum/.*/shape:4096x4096/", r"^matmul/", r"^conv/", r"^quant/",
    r"^alloc/", r"^transfer/",
)
REUSE_CUDA_SHAPE = {"smoke": (1, 64, 1024)}  # else 1 GiB, as CLAIMS.md (bench_alloc_cuda.cpp)


def _list_tests(exe, matrix):
    try:
        return subprocess.run([exe, "--benchmark_list_tests", f"--sb_matrix={matrix}"],
                              capture_output=True, text=True, timeout=GB_LIST_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueError(f"{exe} --benchmark_list_tests: {e}") from None


def ours_cases(bench_dir, matrix):
    """{name: (family, keys)} of the impl:ours cases our binaries in bench_dir register
    at `matrix`, names canonical. Raises ValueError naming the binary on failure.
    The binaries list at once, one per core: each spends most of a start-up in the
    static initialisers of the CUDA libraries it links (a few tenths of a second)."""
    exes = sorted(os.path.join(bench_dir, f) for f in os.listdir(bench_dir)
                  if f.startswith("bench_") and not f.endswith(".p")
                  and os.path.isfile(os.path.join(bench_dir, f))
                  and os.access(os.path.join(bench_dir, f), os.X_OK))
    if not exes:
        raise ValueError(f"{bench_dir}: no bench_* binaries (build them first: ninja -C BUILD)")
    out = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        listed = list(pool.map(lambda exe: _list_tests(exe, matrix), exes))
    for exe, p in zip(exes, listed):
        if p.returncode != 0:
            raise ValueError(f"{exe} --benchmark_list_tests exited {p.returncode}: "
                             f"{(p.stderr or p.stdout).strip()[-300:]}")
        for line in p.stdout.split():
            try:
                family, keys = sbtables.parse_name(line)
            except ValueError as e:
                raise ValueError(f"{exe}: run {line!r}: {e}") from None
            if keys.get("impl") == "ours":
                out[sbtables.canonical(family, keys)] = (family, keys)
    return out


def ours_cases_kept(bench_dir, matrix, path):
    """ours_cases, kept in the JSON file `path` for later calls: read from it when it
    exists and was listed from the same binaries (directory, matrix, and each binary's
    size and modification time), else listed and written to it. The re-check runs the
    peer runner once a round on one build."""
    stats = {f: os.stat(os.path.join(bench_dir, f)) for f in sorted(os.listdir(bench_dir))
             if f.startswith("bench_") and not f.endswith(".p")}
    stamp = {"bench_dir": os.path.abspath(bench_dir), "matrix": matrix,
             "binaries": {f: [st.st_size, st.st_mtime_ns] for f, st in stats.items()}}
    try:
        with open(path) as f:
            kept = json.load(f)
        if kept.get("stamp") == stamp:
            return {k: (v[0], v[1]) for k, v in kept["cases"].items()}
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    out = ours_cases(bench_dir, matrix)
    sbtables.atomic_write(path, json.dumps({"stamp": stamp, "cases": out}) + "\n")
    return out


def dims(shape_key_):
    return tuple(int(d) for d in shape_key_.split("x"))


def takes(be, dt):
    """Whether the backend runs rows of dtype dt (torch: f32 and bf16; NumPy: f32)."""
    return dt in getattr(be, "dtypes", ("f32",))


def peer_keys(keys, be, dev, **change):
    """Our keys with the peer's impl (and device), plus any changes."""
    k = dict(keys, impl=be.impl, device=dev)
    k.update(change)
    return {key: k[key] for key in KEY_ORDER if k.get(key) is not None}


def elementwise_case(be, dev, keys):
    """bench_elementwise.cpp's cases: 4-D NCHW sizes. For binary ops the layout is b's
    and a is contiguous, except channels_last where a, b and out all are; unary ops take
    x in the layout. transposed: dims 2 and 3 stored swapped (a .transpose(2, 3) view);
    sliced: every other element of a buffer twice as long in W; expanded: 1x1xHxW
    broadcast to NxCxHxW; mixed_formats: binary a NCHW and b NHWC into an NCHW out,
    unary x NCHW into an NHWC out (out= only). In-place updates a dense copy (binary: of a; unary: of x, a
    fresh stepped tensor for sliced). The peers' outofplace is their own default
    allocator (torch's CPU one is plain posix_memalign/free), so there is no
    outofplace_system row; normalize has no in-place or out= form in torch or NumPy, and
    an expanded tensor takes no in-place write. op:loop (S3): relu(add(mul(a, b), b)),
    out= into three buffers made once vs out-of-place (two temporaries and a result)."""
    op, layout, style = keys["op"], keys["layout"], keys["style"]
    if not takes(be, keys["dtype"]) or style == "outofplace_system":
        return None
    if op == "normalize" and style != "outofplace":
        return None
    if style == "inplace" and layout == "expanded" and op in ("relu", "normalize"):
        return None
    if op == "loop" and layout != "contiguous":
        return None
    if layout == "mixed_formats" and op in ("relu", "normalize") and style != "out":
        return None
    return _ew_case(be, dev, op, layout, style, dims(keys["shape"]), int(keys["threads"]), keys["dtype"])


def _ew_make(be, layout, shape, make):
    """A tensor of NCHW `shape` in the layout (bench_elementwise.cpp make())."""
    n, c, h, w = shape
    if layout == "transposed":
        return be.swap(make((n, c, w, h)), 2, 3)
    if layout == "sliced":
        return make((n, c, h, 2 * w))[..., ::2]
    if layout == "expanded":
        return be.expand(make((1, 1, h, w)), shape)
    if layout == "channels_last":
        return be.to_channels_last(make(shape))
    return make(shape)


def _ew_case(be, dev, op, layout, style, shape, threads, dt="f32"):
    keys = dict(op=op, impl=be.impl, device=dev, layout=layout, style=style, dtype=dt,
                shape=shape_key(shape), threads=threads)
    binary = op in ("add", "mul", "loop")
    isz = sbtables.DTYPE_BYTES[dt]

    def build():
        rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
        ones = lambda s: be.typed(be.rand(s, 1.0, 1.0), dt)  # noqa: E731 - mul's b: a *= b keeps a
        mixed = layout == "mixed_formats"
        if binary:
            la = "channels_last" if layout == "channels_last" else "contiguous"
            lb = "channels_last" if mixed else layout
            a = pooled(be, ("a", la, shape, dt), lambda: _ew_make(be, la, shape, rand))
            b = pooled(be, ("b", op == "mul", lb, shape, dt),
                       lambda: _ew_make(be, lb, shape, ones if op == "mul" else rand))
            # (loop's b is uniform, as ours: it is never updated in place)
        else:
            lx = "contiguous" if mixed else layout
            a = pooled(be, ("x", lx, shape, dt), lambda: _ew_make(be, lx, shape, rand))
            b = None
        target = None
        if style == "inplace":  # a fresh dense copy; the shared inputs never change
            target = _ew_make(be, layout, shape, rand) if not binary and \
                layout == "sliced" else be.clone(a)
        c = be.empty(shape, layout == "channels_last" or (mixed and not binary), dt) \
            if style == "out" else None
        if op == "loop":
            fn = be.loop(a, b, c, be.empty(shape, dt=dt), be.empty(shape, dt=dt)) if style == "out" \
                else be.loop(a, b)
        elif op == "normalize":
            fn = be.normalize(a)
        elif binary:
            fn = be.binary(op, style, target if style == "inplace" else a, b, c)
        else:
            fn = be.relu(style, target if style == "inplace" else a, c)
        inputs = [x for x in (a, b, c, target) if x is not None]
        peak, allocs, _ = be.alloc_of(fn, inputs)
        if op == "add" and style == "inplace":
            fn()  # undo the add_ of the probe
        n = numel(shape)
        if op == "loop":  # mul: a, b -> t1; add: t1, b -> t2; relu: t2 -> y
            nbytes = distinct_bytes(be, a) + 2 * distinct_bytes(be, b) + 5 * isz * n
            ws = span_bytes(be, a) + span_bytes(be, b) + 3 * isz * n
        else:
            nbytes = distinct_bytes(be, a) + (distinct_bytes(be, b) if binary else 0) + isz * n
            ws = (span_bytes(be, b) if binary else 0) + \
                (span_bytes(be, target) if style == "inplace" else span_bytes(be, a) + isz * n)
        flop = {"normalize": 6, "loop": 3}.get(op, 1) * n
        return Work(fn, nbytes, flop, ws, peak, allocs, overhead_style=style)
    return Case("elementwise", keys, build)


def copy_case(be, dev, keys):
    """bench_copy.cpp: contiguous() of a transposed 2-D or channels-last 4-D tensor, its
    clone() twin (layout contiguous), NCHW -> NHWC, permute(2, 0, 1).contiguous()."""
    op, layout, shape, dt = keys["op"], keys["layout"], dims(keys["shape"]), keys["dtype"]
    if not takes(be, dt) or keys["style"] != "copy":
        return None
    rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
    if op == "contiguous" and layout == "transposed" and len(shape) == 2:
        src, f = lambda: be.transpose(rand(shape[::-1])), be.contiguous
    elif op == "contiguous" and layout == "channels_last" and len(shape) == 4:
        src, f = lambda: be.to_channels_last(rand(shape)), be.contiguous
    elif op == "contiguous" and layout == "contiguous":
        src, f = lambda: rand(shape), be.clone
    elif op == "nchw_to_nhwc" and layout == "contiguous" and len(shape) == 4:
        src, f = lambda: rand(shape), be.to_channels_last
    elif op == "permute" and layout == "contiguous" and len(shape) == 3:
        src, f = lambda: rand(shape), lambda x: be.contiguous(be.transpose(x, 2, 0, 1))
    else:
        return None

    def build():
        x = pooled(be, ("copy", layout, shape, dt), src)
        fn = lambda: f(x)  # noqa: E731
        peak, allocs, y = be.alloc_of(fn, [x])
        nbytes = distinct_bytes(be, x) + distinct_bytes(be, y)
        ws = span_bytes(be, x) + span_bytes(be, y)
        return Work(fn, nbytes, 0, ws, peak, allocs)
    return Case("copy", peer_keys(keys, be, dev), build)


def reduce_case(be, dev, keys):
    """bench_reduce.cpp's cases: sum, mean, max, var (correction 1) over dim 1 (inner)
    or dim 0 (outer) of an R x C float32 matrix stored row-major (contiguous) or column
    by column (column_major: a .t() view) or every other element of an R x 2C buffer
    (sliced: x[:, ::2]), the result allocated by the call (no style key, as ours)."""
    op, layout, dim, shape = keys["op"], keys["layout"], keys["dim"], dims(keys["shape"])
    if not takes(be, keys["dtype"]) or len(shape) != 2 or keys.get("style") is not None:
        return None
    return Case("reduce", peer_keys(keys, be, dev),
                lambda: _reduce_work(be, op, layout, dim, shape, keys["dtype"]))


def _reduce_work(be, op, layout, dim, shape, dt="f32"):
    rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
    make = {"contiguous": lambda: rand(shape),
            "sliced": lambda: rand((shape[0], 2 * shape[1]))[:, ::2]}.get(
        layout, lambda: be.transpose(rand(shape[::-1])))
    x = pooled(be, ("reduce", layout, shape, dt), make)
    fn = be.reduce(op, x, 1 if dim == "inner" else 0)
    peak, allocs, _ = be.alloc_of(fn, [x])
    out_bytes = (shape[0] if dim == "inner" else shape[1]) * sbtables.DTYPE_BYTES[dt]
    return Work(fn, distinct_bytes(be, x) + out_bytes, (4 if op == "var" else 1) * numel(shape),
                span_bytes(be, x) + out_bytes, peak, allocs)


def matmul_case(be, dev, keys):
    """[M,K] x [K,N], shape MxKxN, as benchmarks/bench_matmul.cpp: layout names the
    non-contiguous operand, always A: contiguous (A, B row-major), transposed (A a .t()
    view of a row-major [K, M] buffer), sliced (A every other row of a row-major [2M, K]
    buffer), column_major (A, B and the out= buffer column-major), contiguous_first (A
    transposed; A.contiguous() then the product, timed together). Styles out and
    outofplace."""
    layout, style, dt = keys["layout"], keys["style"], keys["dtype"]
    if not takes(be, dt) or style not in ("out", "outofplace"):
        return None
    m, k, n = dims(keys["shape"])

    def build():
        rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
        a = pooled(be, ("mm_a", m, k, dt), lambda: rand((m, k)))
        b = pooled(be, ("mm_b", k, n, dt), lambda: rand((k, n)))
        if layout in ("transposed", "contiguous_first", "column_major"):
            a = pooled(be, ("mm_at", m, k, dt), lambda: be.transpose(rand((k, m))))
        elif layout == "sliced":
            a = pooled(be, ("mm_as", m, k, dt), lambda: rand((2 * m, k))[::2])
        if layout == "column_major":
            b = pooled(be, ("mm_bt", k, n, dt), lambda: be.transpose(rand((n, k))))
        c = None
        if style == "out":
            c = be.transpose(be.empty((n, m), dt=dt)) if layout == "column_major" else be.empty((m, n), dt=dt)
        if layout == "contiguous_first":
            mm = be.matmul
            fn = (lambda: mm(be.contiguous(a), b, c)()) if c is not None else \
                (lambda: mm(be.contiguous(a), b)())  # noqa: E731
        else:
            fn = be.matmul(a, b, c)
        peak, allocs, y = be.alloc_of(fn, [a, b] + ([c] if c is not None else []))
        nbytes = distinct_bytes(be, a) + distinct_bytes(be, b) + distinct_bytes(be, y)
        if layout == "contiguous_first":  # the copy reads and writes a once more
            nbytes += 2 * distinct_bytes(be, a)
        ws = span_bytes(be, a) + span_bytes(be, b) + span_bytes(be, y)
        return Work(fn, nbytes, 2 * m * n * k, ws, peak, allocs)
    return Case("matmul", peer_keys(keys, be, dev), build, blas=True)


def conv_geometry(shape):
    """(N, C, H, W, O, K, groups) of a conv run's shape key (cases::shape_key in
    cases/conv.cpp): NxCxHxW is a 3x3 C -> C conv, groups 1; NxCxHxWxOxKxG names the
    output channels, the kernel size and the groups. None for any other form."""
    d = dims(shape)
    if len(d) == 4:
        return d + (d[1], 3, 1)
    return d if len(d) == 7 else None


def conv_case(be, dev, keys):
    """conv2d KxK, stride 1, padding K // 2, no bias (cases/conv.h: the geometry from the
    shape key, conv_geometry), NCHW vs channels-last (input and weights in the layout),
    and max/avg pooling 3x3, stride 2, padding 1 on the input; torch only (NumPy has
    neither), out-of-place only (torch has no out= form). conv2d dtypes: f32 and bf16,
    and on CUDA f16 and tf32 (float32 with torch.backends.cudnn.allow_tf32 set for the
    row's calls, off for every other row); cuDNN's benchmark mode is on for the CUDA
    rows (TorchBackend), as the issue's measurements were taken."""
    op, layout, dt = keys["op"], keys["layout"], keys["dtype"]
    cuda = dev.startswith("cuda")
    if be.impl != "torch" or keys["style"] != "outofplace" or \
            layout not in ("contiguous", "channels_last"):
        return None
    if op == "conv2d":
        geo = conv_geometry(keys["shape"])
        if geo is None or not (dt in ("f32", "bf16") or (cuda and dt in ("tf32", "f16"))):
            return None
        nb, c, h, w, o, k, g = geo

        def build():
            t = be.t
            F, tdt = t.nn.functional, {"f16": t.float16, "bf16": t.bfloat16}.get(dt, t.float32)
            x, wt = be.rand((nb, c, h, w)).to(tdt), be.rand((o, c // g, k, k)).to(tdt)
            if layout == "channels_last":
                x, wt = be.to_channels_last(x), be.to_channels_last(wt)
            tf32 = dt == "tf32"

            def fn():
                if cuda:
                    t.backends.cudnn.allow_tf32 = tf32
                return F.conv2d(x, wt, None, 1, k // 2, 1, g)
            peak, allocs, y = be.alloc_of(fn, [x, wt])
            if cuda:
                t.backends.cudnn.allow_tf32 = False
            if layout == "channels_last" and not y.is_contiguous(
                    memory_format=t.channels_last):
                raise Skip("torch returned an NCHW result for a channels-last input")
            nbytes = distinct_bytes(be, x) + distinct_bytes(be, wt) + distinct_bytes(be, y)
            flop = 2 * y.numel() * (c // g) * k * k
            return Work(fn, nbytes, flop, nbytes, peak, allocs)
        return Case("conv", peer_keys(keys, be, dev), build)
    if dt != "f32":
        return None
    nb, c, h, w = dims(keys["shape"])
    if op not in ("max_pool2d", "avg_pool2d"):
        return None

    def build_pool():
        fn_op = getattr(be.t.nn.functional, op)
        x = be.rand((nb, c, h, w))
        if layout == "channels_last":
            x = be.to_channels_last(x)
        fn = lambda: fn_op(x, 3, 2, 1)  # noqa: E731
        peak, allocs, y = be.alloc_of(fn, [x])
        if layout == "channels_last" and not y.is_contiguous(
                memory_format=be.t.channels_last):
            raise Skip("torch returned an NCHW result for a channels-last input")
        nbytes = distinct_bytes(be, x) + distinct_bytes(be, y)
        flop = 9 * y.numel() if op == "avg_pool2d" else 0  # as bench_conv.cpp
        return Work(fn, nbytes, flop, nbytes, peak, allocs)
    return Case("conv", peer_keys(keys, be, dev), build_pool)


def quant_case(be, dev, keys):
    """A linear layer y = x W^T + b, [batch, in] x [out, in], shape batch x in x out:
    f32, f16, bf16 (the layer and x in bfloat16), int8 dynamic (quantize_dynamic) and
    int8 static (prepare, calibrate,
    convert) through torch; f32 through NumPy (x @ W.T + b). Counters weight_bytes
    and rel_error (vs the same layer in float64). Our MLP rows have no peer."""
    dt = keys["dtype"]
    if keys["op"] != "linear" or (be.impl == "numpy" and dt != "f32") or \
            dt not in ("f32", "f16", "bf16", "int8_dynamic", "int8_static"):
        return None
    batch, fin, fout = dims(keys["shape"])

    def build():
        if be.impl == "numpy":
            np = be.np
            x, wt, bias = be.rand((batch, fin)), be.rand((fout, fin)) / 32, be.rand((fout,))
            fn = lambda: np.add(np.matmul(x, wt.T), bias)  # noqa: E731
            peak, allocs, y = be.alloc_of(fn, [x])
            ref = x.astype(np.float64) @ wt.T.astype(np.float64) + bias
            rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
            return Work(fn, x.nbytes + wt.nbytes + bias.nbytes + y.nbytes,
                        2 * batch * fin * fout, 0, peak, allocs,
                        extra={"weight_bytes": wt.nbytes, "rel_error": rel})
        return _torch_linear(be, dt, batch, fin, fout)
    return Case("quant", peer_keys(keys, be, dev), build, blas=(dt == "f32"))


def cpu_has_vnni():
    """Whether the CPU has 8-bit dot products (AVX512_VNNI or AVX_VNNI), from
    /proc/cpuinfo (True where it cannot be read: no change from torch's defaults)."""
    flags = cpu_flags()
    return not flags or bool({"avx512_vnni", "avx_vnni"} & flags)


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def torch_bf16_cpu_path():
    """Which kernels torch 1.13 runs a CPU bfloat16 matmul or linear with: oneDNN where
    the CPU has AVX-512BW, VL and DQ (its mkldnn_bf16_device_check), else ATen's
    reference loops (one multiply-add at a time). "unknown" where the flags cannot be read."""
    flags = cpu_flags()
    if not flags:
        return "unknown"
    return "onednn" if {"avx512bw", "avx512vl", "avx512dq"} <= flags else "reference"


def static_qconfig(q, engine):
    """torch's default static qconfig for the engine, with 7-bit activations
    (reduce_range) where the CPU has no VNNI: without it, oneDNN's u8 x s8 products
    (vpmaddubsw) saturate their int16 pair sums, which cost the layer 9-20% relative
    error on an AVX2-only EPYC. torch's own x86 qconfig reduces the range for the same
    reason, and our int8 static layer takes 7-bit activations on every CPU (quant.h)."""
    qc = q.get_default_qconfig(engine)
    if engine == "onednn" and not cpu_has_vnni():
        qc = q.QConfig(activation=qc.activation.with_args(reduce_range=True), weight=qc.weight)
    return qc


def _torch_linear(be, dt, batch, fin, fout):
    t = be.t
    q = t.ao.quantization
    t.manual_seed(3)
    lin = t.nn.Linear(fin, fout).eval()
    x = be.rand((batch, fin))
    with t.no_grad():
        ref = lin.double()(x.double()) if not be.cuda else lin.double().to(be.device)(x.double())
        lin = lin.float()
    model = t.nn.Sequential(lin).to(be.device).eval()
    if dt == "f32":
        m = model
    elif dt in ("f16", "bf16"):
        half = t.float16 if dt == "f16" else t.bfloat16
        m, x = model.to(half), x.to(half)
        try:
            with t.no_grad():
                m(x)
        except RuntimeError as e:
            raise Skip(f"{dt} linear not supported by torch {t.__version__} on "
                       f"{be.device}: {str(e).splitlines()[0]}") from None
    else:
        if be.cuda:
            raise Skip("torch int8 quantization runs on the CPU only")
        engines = t.backends.quantized.supported_engines
        engine = next((e for e in ("fbgemm", "x86", "onednn", "qnnpack") if e in engines), None)
        if engine is None:
            raise Skip(f"no quantized engine in torch {t.__version__}")
        t.backends.quantized.engine = engine
        if dt == "int8_dynamic":
            m = q.quantize_dynamic(model, {t.nn.Linear}, dtype=t.qint8)
        else:
            qm = t.nn.Sequential(q.QuantStub(), lin, q.DeQuantStub()).eval()
            qm.qconfig = static_qconfig(q, engine)
            prepared = q.prepare(qm)
            with t.no_grad():
                for _ in range(4):  # calibration pass
                    prepared(be.rand((batch, fin)))
            m = q.convert(prepared)
    with t.no_grad():
        y = m(x).double()
        rel = float((y - ref).norm() / ref.norm())
    wbytes = _weight_bytes(t, m)
    fn_ = m

    def fn():
        with t.no_grad():
            return fn_(x)
    peak, allocs, _ = be.alloc_of(fn, [x])
    isz = x.element_size()
    return Work(fn, batch * fin * isz + wbytes + fout * 4 + batch * fout * isz,
                2 * batch * fin * fout, 0, peak, allocs,
                extra={"weight_bytes": wbytes, "rel_error": rel})


def _weight_bytes(t, m):
    """Bytes of the layer's weights as stored, bias excluded (as ours: quant.h
    weight_bytes()): f32/f16 elements; int8 elements plus per-channel scales and zero
    points when the quantization is per channel."""
    total = 0
    for mod in m.modules():
        w = getattr(mod, "weight", None)
        if callable(w) and not isinstance(w, t.nn.Parameter):  # quantized Linear
            w = w()
            total += w.numel() * w.element_size()
            if w.qscheme() in (t.per_channel_affine, t.per_channel_symmetric):
                for q in (w.q_per_channel_scales(), w.q_per_channel_zero_points()):
                    total += q.numel() * q.element_size()
        elif isinstance(mod, t.nn.Linear):
            total += mod.weight.numel() * mod.weight.element_size()
    return total
