#!/usr/bin/python3
"""Writes the torch oracle for tests/oracle/test_torch_parity.cpp.

Run by Debian's /usr/bin/python3 (python3-torch). Usage: make_reference.py OUT.json

Every case holds float64 inputs (values representable in float32, so an f32 graph input holds them
exactly), an upstream gradient dL/dout (so the gradients are those of an op placed mid-graph, with the
incoming gradient chained), the forward output and the gradient of every differentiable input, all
computed by torch in float64. The "mlp" entry holds 20 SGD steps of the README example; "optimizers" holds
20 updates of every update rule (with weight decay, clipping and accumulation) for
test_optimizers_torch.cpp, which runs them through a GPU session.
"""
import json
import math
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the C++ test turns this exit code into a failure, never a skip
    sys.stderr.write("make_reference.py: torch is missing (%s); install python3-torch\n" % e)
    sys.exit(3)

torch.set_default_dtype(torch.float64)
GEN = torch.Generator().manual_seed(1234)


def f32(t):
    # Round to float32 and back so the C++ side can feed the same values through an f32 input.
    return t.float().double()


def randn(*shape, scale=1.0):
    return f32(torch.randn(tuple(shape), generator=GEN) * scale)


def uniform(lo, hi, *shape):
    return f32(torch.rand(tuple(shape), generator=GEN) * (hi - lo) + lo)


def away_from_zero(*shape, margin=0.2):
    # For ops with a kink or a pole at zero: keep inputs off it so gradients are well defined.
    x = torch.rand(*shape, generator=GEN) * 1.5 + margin
    sgn = torch.where(torch.rand(*shape, generator=GEN) < 0.5, -1.0, 1.0)
    return f32(x * sgn)


def distinct(*shape):
    # Values with no ties, for max/min reductions and max pooling (their gradient picks one element).
    n = 1
    for s in shape:
        n *= s
    perm = torch.randperm(n, generator=GEN).double()
    return f32((perm / n - 0.5) * 4.0 + 0.01).reshape(shape)


CASES = []


def case(name, op, inputs, fn, attrs=None, grad=None):
    """inputs: list of (name, tensor, kind) with kind 'f' (differentiable f32), 'c' (f32 without
    gradient) or 'i' (int32). fn(*tensors) -> output tensor."""
    attrs = attrs or {}
    ts = []
    for (_, t, kind) in inputs:
        if kind == "f":
            ts.append(t.clone().requires_grad_(True))
        elif kind == "i":
            ts.append(t.clone().long())
        else:
            ts.append(t.clone())
    out = fn(*ts)
    entry = {
        "name": name,
        "op": op,
        "attrs": attrs,
        "inputs": [
            {"name": n, "shape": list(t.shape), "dtype": "i32" if k == "i" else "f32",
             "grad": k == "f", "data": t.reshape(-1).tolist()}
            for (n, t, k) in inputs
        ],
        "output": {"shape": list(out.shape), "data": out.detach().double().reshape(-1).tolist()},
        "grads": {},
    }
    diff = [t for t in ts if t.requires_grad]
    if diff and out.dtype.is_floating_point and (grad is None or grad):
        up = randn(*out.shape)
        entry["upstream"] = up.reshape(-1).tolist()
        gs = torch.autograd.grad((out * up).sum(), diff, allow_unused=True)
        gi = 0
        for (n, t, k) in inputs:
            if k == "f":
                g = gs[gi]
                gi += 1
                entry["grads"][n] = (torch.zeros_like(t) if g is None else g).reshape(-1).tolist()
    CASES.append(entry)


# ---------------------------------------------------------------- unary
def unary_cases():
    x = randn(3, 5)
    az = away_from_zero(3, 5)
    pos = uniform(0.3, 2.5, 3, 5)
    case("neg", "neg", [("x", x, "f")], lambda x: -x)
    case("abs", "abs", [("x", az, "f")], torch.abs)
    case("sign", "sign", [("x", az, "f")], torch.sign)
    case("exp", "exp", [("x", x, "f")], torch.exp)
    case("log", "log", [("x", pos, "f")], torch.log)
    case("sqrt", "sqrt", [("x", pos, "f")], torch.sqrt)
    case("rsqrt", "rsqrt", [("x", pos, "f")], torch.rsqrt)
    case("reciprocal", "reciprocal", [("x", az, "f")], torch.reciprocal)
    case("square", "square", [("x", x, "f")], torch.square)
    case("relu", "relu", [("x", az, "f")], F.relu)
    case("leaky_relu", "leaky_relu", [("x", az, "f")], lambda x: F.leaky_relu(x, 0.2), {"alpha": 0.2})
    case("elu", "elu", [("x", az, "f")], lambda x: F.elu(x, 0.7), {"alpha": 0.7})
    case("sigmoid", "sigmoid", [("x", x, "f")], torch.sigmoid)
    case("tanh", "tanh", [("x", x, "f")], torch.tanh)
    case("silu", "silu", [("x", x, "f")], F.silu)
    case("gelu_erf", "gelu", [("x", x, "f")], F.gelu, {"tanh": False})
    case("gelu_tanh", "gelu", [("x", x, "f")], lambda x: F.gelu(x, approximate="tanh"), {"tanh": True})
    case("softplus", "softplus", [("x", x, "f")], F.softplus)
    case("sin", "sin", [("x", x, "f")], torch.sin)
    case("cos", "cos", [("x", x, "f")], torch.cos)
    case("erf", "erf", [("x", x, "f")], torch.erf)
    cl = away_from_zero(4, 6)
    cl = torch.where((cl - 0.5).abs() < 0.05, cl + 0.1, cl)  # no input sits on a clamp bound
    case("clamp", "clamp", [("x", cl, "f")], lambda x: torch.clamp(x, -0.5, 0.5), {"lo": -0.5, "hi": 0.5})


# ---------------------------------------------------------------- binary
def binary_cases():
    shapes = [("same", (3, 4), (3, 4)), ("bcast_row", (3, 4), (4,)), ("bcast_both", (2, 1, 4), (3, 1)),
              ("scalar", (2, 3), ())]
    for tag, sa, sb in shapes:
        a, b = randn(*sa), randn(*sb)
        case("add_" + tag, "add", [("a", a, "f"), ("b", b, "f")], torch.add)
        case("sub_" + tag, "sub", [("a", a, "f"), ("b", b, "f")], torch.sub)
        case("mul_" + tag, "mul", [("a", a, "f"), ("b", b, "f")], torch.mul)
    a, b = randn(3, 4), away_from_zero(4)
    case("div_bcast", "div", [("a", a, "f"), ("b", b, "f")], torch.div)
    a, b = uniform(0.5, 2.0, 2, 3), randn(3)
    case("pow_bcast", "pow", [("a", a, "f"), ("b", b, "f")], torch.pow)
    a, b = distinct(2, 3, 4), randn(4)
    case("maximum_bcast", "maximum", [("a", a, "f"), ("b", b, "f")], torch.maximum)
    case("minimum_bcast", "minimum", [("a", a, "f"), ("b", b, "f")], torch.minimum)
    # small integers so that equality happens
    ia = f32(torch.randint(0, 3, (3, 4), generator=GEN).double())
    ib = f32(torch.randint(0, 3, (4,), generator=GEN).double())
    for op, fn in [("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le), ("gt", torch.gt),
                   ("ge", torch.ge)]:
        case(op, op, [("a", ia, "c"), ("b", ib, "c")], lambda a, b, fn=fn: fn(a, b).double())
    cond = f32((torch.rand(3, 4, generator=GEN) < 0.5).double())
    case("where_bcast", "where", [("cond", cond, "c"), ("a", randn(3, 4), "f"), ("b", randn(4), "f")],
         lambda c, a, b: torch.where(c != 0, a, b))


# ---------------------------------------------------------------- matmul
def matmul_cases():
    case("matmul_2d", "matmul", [("a", randn(3, 5), "f"), ("b", randn(5, 4), "f")], torch.matmul)
    case("matmul_batched_bcast", "matmul", [("a", randn(2, 1, 3, 4), "f"), ("b", randn(3, 4, 2), "f")],
         torch.matmul)
    case("matmul_batch_x_2d", "matmul", [("a", randn(2, 3, 5), "f"), ("b", randn(5, 4), "f")], torch.matmul)
    case("matmul_tb", "matmul", [("a", randn(3, 5), "f"), ("b", randn(4, 5), "f")],
         lambda a, b: a @ b.transpose(-1, -2), {"transpose_a": False, "transpose_b": True})
    case("matmul_ta", "matmul", [("a", randn(2, 5, 3), "f"), ("b", randn(2, 5, 4), "f")],
         lambda a, b: a.transpose(-1, -2) @ b, {"transpose_a": True, "transpose_b": False})


# ---------------------------------------------------------------- reductions, softmax
def reduction_cases():
    x = randn(2, 3, 4)
    d = distinct(2, 3, 4)
    for axes, keep in [([], False), ([1], True), ([0, 2], False), ([-1], False)]:
        tag = "_".join(str(a) for a in axes) if axes else "all"
        tag += "_keep" if keep else ""
        dims = axes if axes else [0, 1, 2]
        case("sum_" + tag, "sum", [("x", x, "f")], lambda x: x.sum(dim=dims, keepdim=keep),
             {"axes": axes, "keepdim": keep})
        case("mean_" + tag, "mean", [("x", x, "f")], lambda x: x.mean(dim=dims, keepdim=keep),
             {"axes": axes, "keepdim": keep})
        case("max_" + tag, "max", [("x", d, "f")], lambda x: torch.amax(x, dim=dims, keepdim=keep),
             {"axes": axes, "keepdim": keep})
        case("min_" + tag, "min", [("x", d, "f")], lambda x: torch.amin(x, dim=dims, keepdim=keep),
             {"axes": axes, "keepdim": keep})
        # population variance (divide by N), as layer/batch norm use it
        case("variance_" + tag, "variance", [("x", x, "f")],
             lambda x: x.var(dim=dims, keepdim=keep, unbiased=False), {"axes": axes, "keepdim": keep})
    case("argmax_1", "argmax", [("x", d, "c")], lambda x: torch.argmax(x, dim=1).double(),
         {"axis": 1, "keepdim": False})
    for axis in [-1, 0]:
        case("softmax_%d" % axis, "softmax", [("x", x, "f")], lambda x: torch.softmax(x, dim=axis), {"axis": axis})
        case("log_softmax_%d" % axis, "log_softmax", [("x", x, "f")], lambda x: torch.log_softmax(x, dim=axis),
             {"axis": axis})


# ---------------------------------------------------------------- losses
def reduce(v, r):
    return v.mean() if r == "mean" else v.sum() if r == "sum" else v


def loss_cases():
    logits = randn(4, 5)
    probs = torch.softmax(randn(4, 5), dim=-1)
    probs = f32(probs)
    for r in ["mean", "sum", "none"]:
        case("cross_entropy_" + r, "cross_entropy", [("logits", logits, "f"), ("targets", probs, "c")],
             lambda l, t: reduce(-(t * torch.log_softmax(l, dim=-1)).sum(-1), r), {"reduction": r})
    l3 = randn(2, 3, 4)
    onehot = F.one_hot(torch.randint(0, 4, (2, 3), generator=GEN), 4).double()
    case("cross_entropy_3d_onehot", "cross_entropy", [("logits", l3, "f"), ("targets", onehot, "c")],
         lambda l, t: -(t * torch.log_softmax(l, dim=-1)).sum(-1).mean(), {"reduction": "mean"})
    labels = torch.tensor([1, -100, 4, 0], dtype=torch.float64)
    for r in ["mean", "sum", "none"]:
        case("cross_entropy_index_" + r, "cross_entropy_index", [("logits", logits, "f"), ("labels", labels, "i")],
             lambda l, y: F.cross_entropy(l, y, ignore_index=-100, reduction=r),
             {"reduction": r, "ignore_index": -100})
    p, t = randn(3, 4), randn(3, 4)
    tl = t + torch.where((p - t).abs() < 0.05, 0.2, 0.0)  # off the |.| kink
    tl = f32(tl)
    bt = f32(torch.rand(3, 4, generator=GEN))
    for r in ["mean", "sum", "none"]:
        case("mse_" + r, "mse_loss", [("pred", p, "f"), ("target", t, "f")],
             lambda a, b: F.mse_loss(a, b, reduction=r), {"reduction": r})
        case("l1_" + r, "l1_loss", [("pred", p, "f"), ("target", tl, "f")],
             lambda a, b: F.l1_loss(a, b, reduction=r), {"reduction": r})
        case("bce_with_logits_" + r, "bce_with_logits", [("logits", p, "f"), ("target", bt, "f")],
             lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=r), {"reduction": r})


# ---------------------------------------------------------------- normalisation
def norm_cases():
    x = randn(2, 3, 6)
    case("layer_norm", "layer_norm", [("x", x, "f"), ("weight", randn(6), "f"), ("bias", randn(6), "f")],
         lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-5), {"eps": 1e-5})
    case("rms_norm", "rms_norm", [("x", x, "f"), ("weight", randn(6), "f")],
         lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, {"eps": 1e-6})
    x4 = randn(3, 4, 2, 3)
    w, b = randn(4), randn(4)
    rm, rv = randn(4, scale=0.3), uniform(0.5, 1.5, 4)
    for training in [True, False]:
        tag = "train" if training else "eval"
        case("batch_norm_" + tag, "batch_norm",
             [("x", x4, "f"), ("weight", w, "f"), ("bias", b, "f"), ("running_mean", rm, "c"),
              ("running_var", rv, "c")],
             lambda x, w, b, m, v: F.batch_norm(x, m.clone(), v.clone(), w, b, training=training, eps=1e-5),
             {"training": training, "eps": 1e-5})
    x2 = randn(5, 3)
    case("batch_norm_2d_train", "batch_norm",
         [("x", x2, "f"), ("weight", randn(3), "f"), ("bias", randn(3), "f"), ("running_mean", randn(3), "c"),
          ("running_var", uniform(0.5, 1.5, 3), "c")],
         lambda x, w, b, m, v: F.batch_norm(x, m.clone(), v.clone(), w, b, training=True, eps=1e-5),
         {"training": True, "eps": 1e-5})
    xg = randn(2, 6, 2, 2)
    case("group_norm", "group_norm", [("x", xg, "f"), ("weight", randn(6), "f"), ("bias", randn(6), "f")],
         lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5), {"groups": 3, "eps": 1e-5})


# ---------------------------------------------------------------- movement
def movement_cases():
    x = randn(2, 3, 4)
    case("reshape", "reshape", [("x", x, "f")], lambda x: x.reshape(4, -1), {"shape": [4, -1]})
    case("permute", "permute", [("x", x, "f")], lambda x: x.permute(2, 0, 1), {"perm": [2, 0, 1]})
    case("transpose", "transpose", [("x", x, "f")], lambda x: x.transpose(0, 2), {"a": 0, "b": 2})
    case("broadcast_to", "broadcast_to", [("x", randn(3, 1), "f")], lambda x: x.expand(2, 3, 4),
         {"shape": [2, 3, 4]})
    y = randn(3, 10)
    case("slice_step", "slice", [("x", y, "f")], lambda x: x[:, 1:9:3],
         {"axis": 1, "start": 1, "stop": 9, "step": 3})
    case("slice_negative", "slice", [("x", y, "f")], lambda x: x[:, -4:],
         {"axis": -1, "start": -4, "stop": 10, "step": 1})
    case("slice_axis0", "slice", [("x", y, "f")], lambda x: x[1:3], {"axis": 0, "start": 1, "stop": 3, "step": 1})
    case("concat", "concat", [("a", randn(2, 1, 3), "f"), ("b", randn(2, 2, 3), "f"), ("c", randn(2, 3, 3), "f")],
         lambda a, b, c: torch.cat([a, b, c], dim=1), {"axis": 1})
    case("split_part1", "split", [("x", randn(2, 7), "f")], lambda x: torch.split(x, [2, 4, 1], dim=1)[1],
         {"sizes": [2, 4, 1], "axis": 1, "index": 1})
    case("squeeze", "squeeze", [("x", randn(2, 1, 3), "f")], lambda x: x.squeeze(1), {"axis": 1})
    case("unsqueeze", "unsqueeze", [("x", randn(2, 3), "f")], lambda x: x.unsqueeze(-1), {"axis": -1})
    case("pad", "pad", [("x", randn(2, 3), "f")], lambda x: F.pad(x, (2, 1, 0, 1), value=0.5),
         {"before": [0, 2], "after": [1, 1], "value": 0.5})
    table = randn(6, 4)
    idx = torch.tensor([[1, 5, 1], [0, 3, 1]], dtype=torch.float64)
    case("gather", "gather", [("table", table, "f"), ("indices", idx, "i")],
         lambda t, i: F.embedding(i, t))
    vals = randn(2, 3, 4)
    case("scatter_add", "scatter_add", [("indices", idx, "i"), ("values", vals, "f")],
         lambda i, v: torch.zeros(6, 4).index_add(0, i.reshape(-1), v.reshape(-1, 4)), {"rows": 6})


# ---------------------------------------------------------------- vision
def vision_cases():
    x = randn(2, 4, 7, 6)
    for tag, stride, pad, dil, groups, cout in [("basic", 1, 0, 1, 1, 3), ("stride_pad", 2, 1, 1, 1, 3),
                                                ("dilation", 1, 2, 2, 1, 2), ("groups", 1, 1, 1, 2, 4)]:
        w = randn(cout, 4 // groups, 3, 3, scale=0.3)
        case("conv2d_" + tag, "conv2d", [("x", x, "f"), ("weight", w, "f")],
             lambda x, w: F.conv2d(x, w, None, stride, pad, dil, groups),
             {"stride": [stride, stride], "padding": [pad, pad], "dilation": [dil, dil], "groups": groups})
    w = randn(2, 4, 2, 3, scale=0.3)
    case("conv2d_rect", "conv2d", [("x", x, "f"), ("weight", w, "f")],
         lambda x, w: F.conv2d(x, w, None, (2, 1), (1, 0), (1, 2), 1),
         {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2], "groups": 1})
    d = distinct(2, 2, 5, 6)
    case("max_pool2d", "max_pool2d", [("x", d, "f")], lambda x: F.max_pool2d(x, 2),
         {"kernel": [2, 2], "stride": [], "padding": [0, 0]})
    case("max_pool2d_overlap_pad", "max_pool2d", [("x", d, "f")], lambda x: F.max_pool2d(x, 3, 2, 1),
         {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1]})
    case("avg_pool2d", "avg_pool2d", [("x", d, "f")], lambda x: F.avg_pool2d(x, 2),
         {"kernel": [2, 2], "stride": [], "padding": [0, 0]})
    # padded cells count in the divisor (torch's default count_include_pad=True)
    case("avg_pool2d_pad", "avg_pool2d", [("x", d, "f")], lambda x: F.avg_pool2d(x, 3, 2, 1),
         {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1]})
    case("global_avg_pool", "global_avg_pool", [("x", d, "f")], lambda x: x.mean(dim=(2, 3)))
    case("upsample_nearest", "upsample_nearest", [("x", randn(1, 2, 2, 3), "f")],
         lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), {"factor": 2})


# ---------------------------------------------------------------- attention
def sdpa(q, k, v, causal, mask, scale):
    hq, hkv = q.shape[1], k.shape[1]
    rep = hq // hkv
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = q @ k.transpose(-1, -2) * (scale if scale else 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    if causal:
        # bottom-right aligned: query i sits at absolute position i + T - S (decoding with a KV cache)
        S, T = s.shape[-2], s.shape[-1]
        keep = torch.ones(S, T, dtype=torch.bool).tril(T - S)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def rope(x, theta, offset):
    S, D = x.shape[-2], x.shape[-1]
    half = D // 2
    inv = theta ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / D)
    ang = (torch.arange(S, dtype=torch.float64) + offset)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention_cases():
    B, S, T, D = 2, 3, 5, 4
    q, k, v = randn(B, 4, S, D), randn(B, 2, T, D), randn(B, 2, T, D)
    case("sdpa_gqa", "sdpa", [("q", q, "f"), ("k", k, "f"), ("v", v, "f")],
         lambda q, k, v: sdpa(q, k, v, False, None, 0.0), {"causal": False, "scale": 0.0})
    case("sdpa_causal_gqa", "sdpa", [("q", q, "f"), ("k", k, "f"), ("v", v, "f")],
         lambda q, k, v: sdpa(q, k, v, True, None, 0.0), {"causal": True, "scale": 0.0})
    q2, k2, v2 = randn(1, 2, 4, D), randn(1, 2, 4, D), randn(1, 2, 4, D)
    case("sdpa_causal_square_scale", "sdpa", [("q", q2, "f"), ("k", k2, "f"), ("v", v2, "f")],
         lambda q, k, v: sdpa(q, k, v, True, None, 0.3), {"causal": True, "scale": 0.3})
    mask = randn(S, T)
    case("sdpa_mask", "sdpa", [("q", q, "f"), ("k", k, "f"), ("v", v, "f"), ("mask", mask, "f")],
         lambda q, k, v, m: sdpa(q, k, v, False, m, 0.0), {"causal": False, "scale": 0.0})
    mask4 = randn(1, 4, S, T)
    case("sdpa_mask_causal", "sdpa", [("q", q, "f"), ("k", k, "f"), ("v", v, "f"), ("mask", mask4, "f")],
         lambda q, k, v, m: sdpa(q, k, v, True, m, 0.0), {"causal": True, "scale": 0.0})
    x = randn(2, 3, 5, 6)
    case("rope", "rope", [("x", x, "f")], lambda x: rope(x, 10000.0, 0), {"theta": 10000.0, "offset": 0})
    case("rope_offset", "rope", [("x", x, "f")], lambda x: rope(x, 500.0, 7), {"theta": 500.0, "offset": 7})


# ---------------------------------------------------------------- a transformer block (nn::TransformerBlock)
def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def transformer_block():
    # the layout of nn::TransformerBlock: pre-norm RMSNorm, one fused qkv projection W [dim, (H + 2 Hkv) hd],
    # rotate-half RoPE on q and k, causal grouped-query attention, output projection, SwiGLU feed-forward
    B, S, D, H, HKV, F_, EPS, THETA = 2, 3, 16, 4, 2, 12, 1e-6, 100.0  # head_dim 4: theta matters
    hd = D // H
    shapes = {"blk.attn_norm.weight": (D,), "blk.attn.qkv.weight": (D, (H + 2 * HKV) * hd),
              "blk.attn.o.weight": (H * hd, D), "blk.ffn_norm.weight": (D,), "blk.ffn.gate.weight": (D, F_),
              "blk.ffn.up.weight": (D, F_), "blk.ffn.down.weight": (F_, D)}
    params = {n: (randn(*s, scale=0.4) + (1.0 if n.endswith("norm.weight") else 0.0)).requires_grad_(True)
              for n, s in shapes.items()}
    x = randn(B, S, D).requires_grad_(True)

    def heads(t, count):
        return t.reshape(B, S, count, hd).permute(0, 2, 1, 3)

    h = rms_norm(x, params["blk.attn_norm.weight"], EPS)
    p = h @ params["blk.attn.qkv.weight"]
    q = rope(heads(p[..., :H * hd], H), THETA, 0)
    k = rope(heads(p[..., H * hd:(H + HKV) * hd], HKV), THETA, 0)
    v = heads(p[..., (H + HKV) * hd:], HKV)
    a = sdpa(q, k, v, True, None, 0.0).permute(0, 2, 1, 3).reshape(B, S, H * hd)
    x1 = x + a @ params["blk.attn.o.weight"]
    h2 = rms_norm(x1, params["blk.ffn_norm.weight"], EPS)
    y = x1 + (F.silu(h2 @ params["blk.ffn.gate.weight"]) * (h2 @ params["blk.ffn.up.weight"])) @ \
        params["blk.ffn.down.weight"]
    up = randn(*y.shape)
    names = list(shapes)
    gs = torch.autograd.grad((y * up).sum(), [x] + [params[n] for n in names])
    return {"config": {"batch": B, "seq": S, "dim": D, "heads": H, "kv_heads": HKV, "ffn_hidden": F_, "eps": EPS,
                       "theta": THETA},
            "x": x.detach().reshape(-1).tolist(),
            "params": {n: {"shape": list(shapes[n]), "data": params[n].detach().reshape(-1).tolist()} for n in names},
            "upstream": up.reshape(-1).tolist(), "output": y.detach().reshape(-1).tolist(),
            "grads": dict([("x", gs[0].reshape(-1).tolist())] +
                          [(n, g.reshape(-1).tolist()) for n, g in zip(names, gs[1:])])}


# ---------------------------------------------------------------- a small CNN from nn layers
def cnn():
    # nn::Conv2d (bias), nn::BatchNorm2d in training mode, relu, max pool, a strided grouped conv, gelu,
    # global average pooling, nn::Linear, cross-entropy with class labels
    shapes = {"conv1.weight": (4, 3, 3, 3), "conv1.bias": (4,), "bn1.weight": (4,), "bn1.bias": (4,),
              "conv2.weight": (6, 2, 3, 3), "conv2.bias": (6,), "fc.weight": (6, 5), "fc.bias": (5,)}
    params = {n: (randn(*s, scale=0.5) + (1.0 if n == "bn1.weight" else 0.0)).requires_grad_(True)
              for n, s in shapes.items()}
    x = randn(2, 3, 6, 6).requires_grad_(True)
    labels = torch.tensor([3, 1])
    P = params
    h = F.conv2d(x, P["conv1.weight"], P["conv1.bias"], 1, 1)
    h = F.batch_norm(h, torch.zeros(4), torch.ones(4), P["bn1.weight"], P["bn1.bias"], training=True, eps=1e-5)
    h = F.max_pool2d(F.relu(h), 2)
    h = F.gelu(F.conv2d(h, P["conv2.weight"], P["conv2.bias"], 2, 1, 1, 2))
    logits = h.mean(dim=(2, 3)) @ P["fc.weight"] + P["fc.bias"]
    loss = F.cross_entropy(logits, labels)
    names = list(shapes)
    gs = torch.autograd.grad(loss, [x] + [P[n] for n in names])
    return {"x": x.detach().reshape(-1).tolist(), "labels": labels.double().tolist(), "loss": loss.item(),
            "params": {n: {"shape": list(shapes[n]), "data": P[n].detach().reshape(-1).tolist()} for n in names},
            "grads": dict([("x", gs[0].reshape(-1).tolist())] +
                          [(n, g.reshape(-1).tolist()) for n, g in zip(names, gs[1:])])}


# ---------------------------------------------------------------- the README MLP, 20 SGD steps
def mlp():
    N, IN, HID, OUT, STEPS, LR = 32, 784, 128, 10, 20, 0.1
    x = f32(torch.rand(N, IN, generator=GEN))
    y = torch.randint(0, OUT, (N,), generator=GEN)
    labels = F.one_hot(y, OUT).double()
    w1 = f32((torch.rand(IN, HID, generator=GEN) * 2 - 1) * math.sqrt(6.0 / IN))
    w2 = f32((torch.rand(HID, OUT, generator=GEN) * 2 - 1) * math.sqrt(6.0 / HID))
    entry = {"x": x.reshape(-1).tolist(), "x_shape": [N, IN], "labels": labels.reshape(-1).tolist(),
             "labels_shape": [N, OUT], "w1_init": w1.reshape(-1).tolist(), "w1_shape": [IN, HID],
             "w2_init": w2.reshape(-1).tolist(), "w2_shape": [HID, OUT], "lr": LR, "steps": STEPS}
    w1 = w1.clone().requires_grad_(True)
    w2 = w2.clone().requires_grad_(True)
    losses = []
    for _ in range(STEPS):
        logits = torch.relu(x @ w1) @ w2
        loss = -(labels * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
        g1, g2 = torch.autograd.grad(loss, [w1, w2])
        losses.append(loss.item())
        with torch.no_grad():
            w1 -= LR * g1
            w2 -= LR * g2
    entry["losses"] = losses
    entry["w1_final"] = w1.detach().reshape(-1).tolist()
    entry["w2_final"] = w2.detach().reshape(-1).tolist()
    return entry


# ---------------------------------------------------------------- optimizers, 20 updates each
def laprop_step(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    """LaProp is not in torch: the update of Ziyin, Wang & Ueda 2020 (arXiv:2002.04839, Algorithm 1) with
    bias correction, written here from the paper's formula, plus decoupled weight decay as in AdamW:
        n_t = b2 n + (1 - b2) g^2;  m_t = b1 m + (1 - b1) g / (sqrt(n_t / (1 - b2^t)) + eps)
        p  <- p (1 - lr wd) - lr m_t / (1 - b1^t)"""
    state["t"] = state.get("t", 0) + 1
    t = state["t"]
    with torch.no_grad():
        for i, (p, g) in enumerate(zip(params, grads)):
            m, n = state.setdefault(i, (torch.zeros_like(p), torch.zeros_like(p)))
            n = b2 * n + (1 - b2) * g * g
            m = b1 * m + (1 - b1) * g / ((n / (1 - b2 ** t)).sqrt() + eps)
            state[i] = (m, n)
            p.mul_(1 - lr * wd)
            p.sub_(lr * m / (1 - b1 ** t))


def optimizers():
    """Each update rule on a 5-8-3 tanh MLP with biases and a cross-entropy loss, 20 updates, each on its own
    batch of 8 rows; "accumulation" 2 means torch accumulates two 4-row halves (loss/2 each, as
    accumulation does), clip means torch.nn.utils.clip_grad_norm_ before the step."""
    gen = torch.Generator().manual_seed(99)
    B, IN, HID, OUT, STEPS = 8, 5, 8, 3, 20
    xs = f32(torch.randn(STEPS, B, IN, generator=gen))
    ys = torch.randint(0, OUT, (STEPS, B), generator=gen)
    init = {"w1": f32(torch.randn(IN, HID, generator=gen) * 0.5), "b1": f32(torch.randn(HID, generator=gen) * 0.1),
            "w2": f32(torch.randn(HID, OUT, generator=gen) * 0.5), "b2": f32(torch.randn(OUT, generator=gen) * 0.1)}
    names = list(init)
    O = torch.optim
    cases = [
        ("sgd", "sgd", dict(lr=0.1), lambda ps: O.SGD(ps, lr=0.1)),
        ("sgd_momentum_wd", "sgd", dict(lr=0.1, momentum=0.9, weight_decay=0.01),
         lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
        ("sgd_nesterov", "sgd", dict(lr=0.05, momentum=0.9, nesterov=True),
         lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)),
        ("adam_wd", "adam", dict(lr=0.01, weight_decay=0.01), lambda ps: O.Adam(ps, lr=0.01, weight_decay=0.01)),
        ("adamw", "adamw", dict(lr=0.01, weight_decay=0.1), lambda ps: O.AdamW(ps, lr=0.01, weight_decay=0.1)),
        ("laprop_wd", "laprop", dict(lr=0.01, weight_decay=0.01), None),
        ("sgd_clip", "sgd", dict(lr=0.1, clip=0.7), lambda ps: O.SGD(ps, lr=0.1)),
        ("adam_clip", "adam", dict(lr=0.01, clip=0.7), lambda ps: O.Adam(ps, lr=0.01)),
        ("sgd_momentum_accumulation", "sgd", dict(lr=0.1, momentum=0.9, accumulation=2),
         lambda ps: O.SGD(ps, lr=0.1, momentum=0.9)),
        ("adamw_clip_accumulation", "adamw", dict(lr=0.01, weight_decay=0.1, clip=0.7, accumulation=2),
         lambda ps: O.AdamW(ps, lr=0.01, weight_decay=0.1)),
    ]
    out = {"x": xs.reshape(-1).tolist(), "labels": ys.double().reshape(-1).tolist(), "steps": STEPS, "batch": B,
           "in": IN, "hidden": HID, "out": OUT,
           "init": {n: {"shape": list(t.shape), "data": t.reshape(-1).tolist()} for n, t in init.items()},
           "cases": []}
    for name, kind, cfg, make in cases:
        P = {n: t.clone().requires_grad_(True) for n, t in init.items()}
        params = [P[n] for n in names]
        opt = make(params) if make else None
        state = {}
        k = cfg.get("accumulation", 1)
        clipped = 0
        for t in range(STEPS):
            for p in params:
                p.grad = None
            for part in range(k):
                rows = slice(part * B // k, (part + 1) * B // k)
                z = torch.tanh(xs[t, rows] @ P["w1"] + P["b1"]) @ P["w2"] + P["b2"]
                (F.cross_entropy(z, ys[t, rows]) / k).backward()
            if "clip" in cfg:
                norm = torch.nn.utils.clip_grad_norm_(params, cfg["clip"])
                clipped += int(norm.item() > cfg["clip"])
            if opt:
                opt.step()
            else:
                laprop_step(params, [p.grad for p in params], state, cfg["lr"], wd=cfg.get("weight_decay", 0.0))
        out["cases"].append({"name": name, "optimizer": kind, "config": cfg, "clipped_steps": clipped,
                             "final": {n: P[n].detach().reshape(-1).tolist() for n in names}})
    return out


# NaN, +-Inf, signed zeros and ordinary values through the elementwise ops, reductions and softmax: torch's
# outputs are the oracle for the CPU reference and the GPU (non-finite numbers written as "nan", "inf",
# "-inf", which JSON lacks). No gradients: the point is which values come out NaN or infinite.
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, -2.5, -1.0, -0.3, 0.3, 1.0, 2.5, 20.0]
NONFINITE = []


def enc(values):
    return [v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) for v in values]


def nonfinite_case(name, op, inputs, fn, attrs=None):
    out = fn(*[t for (_, t) in inputs]).double()
    NONFINITE.append({"name": name, "op": op, "attrs": attrs or {},
                      "inputs": [{"name": n, "shape": list(t.shape), "data": enc(t.reshape(-1).tolist())}
                                 for (n, t) in inputs],
                      "output": {"shape": list(out.shape), "data": enc(out.reshape(-1).tolist())}})


def nonfinite_cases():
    x = torch.tensor(SPECIAL)
    unary = {"neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "log": torch.log,
             "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "square": torch.square,
             "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "softplus": F.softplus,
             "sin": torch.sin, "cos": torch.cos, "erf": torch.erf}
    for name, fn in unary.items():
        nonfinite_case("nonfinite_" + name, name, [("x", x)], fn)
    nonfinite_case("nonfinite_leaky_relu", "leaky_relu", [("x", x)], lambda t: F.leaky_relu(t, 0.1), {"alpha": 0.1})
    nonfinite_case("nonfinite_elu", "elu", [("x", x)], lambda t: F.elu(t, 0.7), {"alpha": 0.7})
    nonfinite_case("nonfinite_gelu_erf", "gelu", [("x", x)], F.gelu, {"tanh": False})
    nonfinite_case("nonfinite_gelu_tanh", "gelu", [("x", x)], lambda t: F.gelu(t, approximate="tanh"), {"tanh": True})
    nonfinite_case("nonfinite_clamp", "clamp", [("x", x)], lambda t: torch.clamp(t, -0.5, 0.7), {"lo": -0.5, "hi": 0.7})
    a, b = x.reshape(-1, 1), x.reshape(1, -1)
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
              "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
              "le": torch.le, "gt": torch.gt, "ge": torch.ge}
    for name, fn in binary.items():
        nonfinite_case("nonfinite_" + name, name, [("a", a), ("b", b)], fn)
    # one special per row of otherwise ordinary values
    rows = torch.tensor([[v if c == r % 5 else 0.25 * c - 0.4 for c in range(5)] for r, v in enumerate(SPECIAL)])
    for name, fn in {"sum": lambda t: t.sum(dim=1), "mean": lambda t: t.mean(dim=1),
                     "max": lambda t: t.amax(dim=1), "min": lambda t: t.amin(dim=1)}.items():
        nonfinite_case("nonfinite_" + name, name, [("x", rows)], fn, {"axes": [1], "keepdim": False})
    nonfinite_case("nonfinite_argmax", "argmax", [("x", rows)], lambda t: torch.argmax(t, dim=1),
                   {"axis": 1, "keepdim": False})
    nonfinite_case("nonfinite_softmax", "softmax", [("x", rows)], lambda t: torch.softmax(t, dim=1), {"axis": 1})
    nonfinite_case("nonfinite_log_softmax", "log_softmax", [("x", rows)], lambda t: torch.log_softmax(t, dim=1),
                   {"axis": 1})


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: make_reference.py OUT.json\n")
        sys.exit(2)
    unary_cases()
    binary_cases()
    matmul_cases()
    reduction_cases()
    loss_cases()
    norm_cases()
    movement_cases()
    vision_cases()
    attention_cases()
    nonfinite_cases()
    doc = {"torch_version": torch.__version__, "cases": CASES, "nonfinite": NONFINITE, "mlp": mlp(),
           "transformer_block": transformer_block(), "cnn": cnn()}
    doc["optimizers"] = optimizers()
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
