# peers/backends.py — PyTorch and NumPy behind one interface (TorchBackend,
# NumpyBackend) and the input pool. Part of stridebench.peers (its __init__ says what
# the peer runner does).

from .common import BIG_BLOCK, BIG_INPUT

# ---------------------------------------------------------------- backends
# One small adapter per library gives the cases what they need: inputs in each layout,
# the ops in each style, sizes, and how to measure what a call allocates.

class TorchBackend:
    impl = "torch"
    dtypes = ("f32", "bf16")  # the row dtypes it takes (bf16: torch.bfloat16)

    def __init__(self, device):
        import torch
        self.t, self.device = torch, device
        self.cuda = device.startswith("cuda")
        self.gen = torch.Generator().manual_seed(1)
        if self.cuda:
            # f32 rows are float32 arithmetic on both sides: cuDNN would take TF32 tensor
            # cores for conv2d by default (matmul's default is already off), and ours
            # take them only where a row says tf32.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            # cuDNN times its algorithms once per layer and keeps the fastest, as our
            # conv2d does (Note [cuDNN conv plans])
            torch.backends.cudnn.benchmark = True

    def version(self):
        return self.t.__version__

    def sync(self):
        if self.cuda:
            self.t.cuda.synchronize()

    def _dev(self, x):
        return x.to(self.device) if self.cuda else x

    def rand(self, shape, lo=-1.0, hi=1.0):
        n = numel(shape)
        if n <= BIG_INPUT:
            return self._dev(self.t.empty(shape).uniform_(lo, hi, generator=self.gen))
        block = self.t.empty(BIG_BLOCK).uniform_(lo, hi, generator=self.gen)
        return self._dev(block.repeat(-(-n // BIG_BLOCK))[:n].view(shape))

    def signs(self, shape):
        return self._dev(self.t.randint(0, 2, shape, generator=self.gen).float() * 2 - 1)

    def typed(self, x, dt):
        """x (float32) as the row's dtype."""
        return x.to(self.t.bfloat16) if dt == "bf16" else x

    def empty(self, shape, channels_last=False, dt="f32"):
        fmt = self.t.channels_last if channels_last else self.t.contiguous_format
        return self.t.empty(shape, device=self.device, memory_format=fmt,
                            dtype=self.t.bfloat16 if dt == "bf16" else self.t.float32)

    def to_channels_last(self, x):
        return x.contiguous(memory_format=self.t.channels_last)

    def transpose(self, x, *perm):
        return x.permute(*perm) if perm else x.t()

    def expand(self, x, shape):
        return x.expand(*shape)

    def contiguous(self, x):
        return x.contiguous()

    def clone(self, x):  # keeps a dense layout (preserve_format), as ours
        return x.clone()

    def swap(self, x, d1, d2):
        return x.transpose(d1, d2)

    def normalize(self, x):  # (x - mean) / sqrt(var + eps) along the last dim: fused
        F, w = self.t.nn.functional, (x.shape[-1],)
        return lambda: F.layer_norm(x, w, eps=1e-5)

    def reduce(self, op, x, dim):
        f = {"sum": x.sum, "mean": x.mean, "max": x.amax, "var": x.var}[op]
        return lambda: f(dim)

    @staticmethod
    def strides(x):
        return tuple(x.stride())

    @staticmethod
    def itemsize(x):
        return x.element_size()

    # elementwise: (fn for the style) ---------------------------------
    def binary(self, op, style, a, b, c):
        t = self.t
        if op == "add":
            if style == "inplace":
                flip = [False]

                def f():  # alternate add_/sub_ so the values stay bounded
                    flip[0] = not flip[0]
                    return a.add_(b) if flip[0] else a.sub_(b)
                return f
            if style == "out":
                return lambda: t.add(a, b, out=c)
            return lambda: t.add(a, b)
        if op == "mul":  # b holds +-1: a's magnitudes never change
            if style == "inplace":
                return lambda: a.mul_(b)
            if style == "out":
                return lambda: t.mul(a, b, out=c)
            return lambda: t.mul(a, b)
        raise ValueError(op)

    def loop(self, a, b, c=None, t1=None, t2=None):
        t = self.t
        if c is not None:
            return lambda: t.clamp_min(t.add(t.mul(a, b, out=t1), b, out=t2), 0, out=c)
        return lambda: t.relu(t.add(t.mul(a, b), b))

    def relu(self, style, a, c):
        t = self.t
        if style == "inplace":
            return lambda: a.relu_()
        if style == "out":  # at::relu is clamp_min(x, 0); relu has no out= overload
            return lambda: t.clamp_min(a, 0, out=c)
        return lambda: t.relu(a)

    def sum(self, x, dim):
        return lambda: x.sum(dim)

    def matmul(self, a, b, c=None):
        t = self.t
        return (lambda: t.matmul(a, b, out=c)) if c is not None else (lambda: t.matmul(a, b))

    # allocation of one call --------------------------------------------
    def alloc_of(self, fn, inputs):
        """(peak bytes, allocations, result) of one call of fn. CUDA: the caching allocator's
        statistics (exact). CPU: torch keeps no CPU allocator statistics, so the bytes
        of the storage the call returns when it is new (temporaries inside the call are
        not seen)."""
        t = self.t
        if self.cuda:
            self.sync()
            base = t.cuda.memory_allocated()
            n0 = t.cuda.memory_stats().get("allocation.all.allocated", 0)
            t.cuda.reset_peak_memory_stats()
            y = fn()
            self.sync()
            peak = t.cuda.max_memory_allocated() - base
            n = t.cuda.memory_stats().get("allocation.all.allocated", 0) - n0
            return peak, n, y
        y = fn()
        ptrs = {x.data_ptr() for x in inputs}
        if isinstance(y, t.Tensor) and y.data_ptr() not in ptrs:
            return y.storage().nbytes(), 1, y
        return 0, 0, y

    peak_method = ("CUDA: torch.cuda.max_memory_allocated() rise over one call; CPU: "
                   "bytes of the new storage the call returns (torch keeps no CPU "
                   "allocator statistics; temporaries inside the call are not seen)")


class NumpyBackend:
    impl = "numpy"
    dtypes = ("f32",)  # NumPy has no bfloat16

    def __init__(self, device):
        import numpy
        self.np, self.device, self.cuda = numpy, device, False
        self.rng = numpy.random.default_rng(1)

    def version(self):
        return self.np.__version__

    def sync(self):
        pass

    def rand(self, shape, lo=-1.0, hi=1.0):
        n = numel(shape)
        x = self.rng.random(min(n, BIG_BLOCK) if n > BIG_INPUT else n, dtype=self.np.float32)
        x *= hi - lo
        x += lo
        if n <= BIG_INPUT:
            return x.reshape(shape)
        y = self.np.empty(n, self.np.float32)
        for i in range(0, n, BIG_BLOCK):  # a plain copy per block: fast, unlike np.resize
            y[i:i + BIG_BLOCK] = x[:min(BIG_BLOCK, n - i)]
        return y.reshape(shape)

    def signs(self, shape):
        return (self.rng.integers(0, 2, size=shape) * 2 - 1).astype(self.np.float32)

    @staticmethod
    def typed(x, dt):  # noqa: ARG004 - float32 only (dtypes)
        return x

    def empty(self, shape, channels_last=False, dt="f32"):  # noqa: ARG002 - float32 only
        if channels_last:  # NHWC storage seen as NCHW
            n, c, h, w = shape
            return self.np.empty((n, h, w, c), self.np.float32).transpose(0, 3, 1, 2)
        return self.np.empty(shape, self.np.float32)

    def to_channels_last(self, x):
        return self.np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)

    def transpose(self, x, *perm):
        return x.transpose(*perm) if perm else x.T

    def expand(self, x, shape):
        return self.np.broadcast_to(x, shape)

    def contiguous(self, x):
        return self.np.ascontiguousarray(x)

    def clone(self, x):  # keeps a dense layout, as ours
        return x.copy(order="K")

    def swap(self, x, d1, d2):
        return x.swapaxes(d1, d2)

    def normalize(self, x):  # NumPy has no fused kernel: mean, var, then the scaling
        np = self.np

        def f():
            m = x.mean(-1, keepdims=True)
            return (x - m) / np.sqrt(x.var(-1, keepdims=True) + np.float32(1e-5))
        return f

    def reduce(self, op, x, dim):
        if op == "var":
            return lambda: x.var(axis=dim, ddof=1)
        f = {"sum": x.sum, "mean": x.mean, "max": x.max}[op]
        return lambda: f(axis=dim)

    @staticmethod
    def strides(x):
        return tuple(s // x.itemsize for s in x.strides)

    @staticmethod
    def itemsize(x):
        return x.itemsize

    def binary(self, op, style, a, b, c):
        np = self.np
        if op == "add":
            if style == "inplace":
                flip = [False]

                def f():
                    flip[0] = not flip[0]
                    return np.add(a, b, out=a) if flip[0] else np.subtract(a, b, out=a)
                return f
            if style == "out":
                return lambda: np.add(a, b, out=c)
            return lambda: np.add(a, b)
        if op == "mul":
            if style == "inplace":
                return lambda: np.multiply(a, b, out=a)
            if style == "out":
                return lambda: np.multiply(a, b, out=c)
            return lambda: np.multiply(a, b)
        raise ValueError(op)

    def loop(self, a, b, c=None, t1=None, t2=None):
        np, zero = self.np, self.np.float32(0)
        if c is not None:
            return lambda: np.maximum(np.add(np.multiply(a, b, out=t1), b, out=t2), zero, out=c)
        return lambda: np.maximum(np.add(np.multiply(a, b), b), zero)

    def relu(self, style, a, c):
        np = self.np
        zero = np.float32(0)
        if style == "inplace":
            return lambda: np.maximum(a, zero, out=a)
        if style == "out":
            return lambda: np.maximum(a, zero, out=c)
        return lambda: np.maximum(a, zero)

    def sum(self, x, dim):
        return lambda: x.sum(axis=dim)

    def matmul(self, a, b, c=None):
        np = self.np
        return (lambda: np.matmul(a, b, out=c)) if c is not None else (lambda: np.matmul(a, b))

    def alloc_of(self, fn, inputs):
        """(peak bytes, allocations, result): NumPy reports its data buffers to tracemalloc, so
        the peak is the traced-memory rise over one call (temporaries included, plus a
        few hundred bytes of Python objects); allocations: 1 when the call returns a
        new array owning its data."""
        import tracemalloc
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            y = fn()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            if started:
                tracemalloc.stop()
        new = isinstance(y, self.np.ndarray) and y.base is None and \
            not any(y is x for x in inputs)
        return max(0, peak), int(new), y

    peak_method = ("tracemalloc peak rise over one call (NumPy traces its data "
                   "buffers; includes Python object bytes)")


POOL = {}


def pooled(be, key, make):
    """One input per key and device, made once and shared by the cases of a family (the
    C++ harness's pooled()): large random inputs are generated once."""
    k = (be.impl, be.device) + tuple(key)
    if k not in POOL:
        POOL[k] = make()
    return POOL[k]


def span_bytes(be, x):
    shape = tuple(x.shape)
    if any(d == 0 for d in shape):
        return 0
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(shape, be.strides(x)))
    return span * be.itemsize(x)


def distinct_bytes(be, x):
    n = 1
    for d, s in zip(tuple(x.shape), be.strides(x)):
        if s != 0:
            n *= d
    return n * be.itemsize(x)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n
