"""load_onnx from Python: a small model written with PyPI onnx (Gather of integer ids, Gemm, Relu, MatMul, Add,
Softmax; a symbolic batch) against onnxruntime's output, then fine-tuned: its initializers are parameters, a loss
appended to the imported graph falls. Runs on the first Vulkan device (lavapipe in CI)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import meganeura as mn

BATCH = 6


def write_model(path, seed=0):
    rng = np.random.default_rng(seed)
    inits = {
        "embed": rng.normal(0, 0.5, (10, 8)).astype(np.float32),
        "fc1.weight": rng.normal(0, 0.4, (16, 8)).astype(np.float32),  # Gemm transB: [out, in]
        "fc1.bias": rng.normal(0, 0.1, (16,)).astype(np.float32),
        "fc2.weight": rng.normal(0, 0.4, (16, 3)).astype(np.float32),
        "fc2.bias": np.zeros(3, np.float32),
    }
    nodes = [
        helper.make_node("Gather", ["embed", "ids"], ["e"], name="embed_lookup"),
        helper.make_node("Add", ["e", "x"], ["h0"], name="mix"),
        helper.make_node("Gemm", ["h0", "fc1.weight", "fc1.bias"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["a1"], name="act"),
        helper.make_node("MatMul", ["a1", "fc2.weight"], ["m2"], name="fc2"),
        helper.make_node("Add", ["m2", "fc2.bias"], ["logits"], name="fc2_bias"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return inits


def data(seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10, BATCH).astype(np.int64)
    x = rng.normal(0, 1, (BATCH, 8)).astype(np.float32)
    return ids, x


@pytest.fixture()
def onnx_file(tmp_path):
    path = str(tmp_path / "tiny.onnx")
    return path, write_model(path)


def test_load_onnx_equals_onnxruntime(onnx_file):
    path, inits = onnx_file
    m = mn.load_onnx(path, dims={"N": BATCH})
    assert [i["name"] for i in m.inputs] == ["ids", "x"]
    assert m.inputs[0]["dtype"] == "i32" and m.outputs[1]["shape"] == [BATCH, 3]
    assert m.opset == 17 and m.op_histogram["Add"] == 2
    # the initializers, as read-only arrays over the model's memory
    assert sorted(m.parameters) == sorted(inits)
    for name, v in inits.items():
        got = m.parameters[name]
        assert got.shape == v.shape and not got.flags.writeable
        np.testing.assert_array_equal(got, v)

    ids, x = data()
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"ids": ids, "x": x})
    s = m.build_inference_session()
    s.set_input("ids", ids)  # int64 from the caller: converted to the input's int32
    s.set_input("x", x)
    s.run()
    for i, name in enumerate(["logits", "probs"]):
        got = s.read_output(i)
        assert got.shape == (BATCH, 3)
        np.testing.assert_allclose(got, want[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s.read_output(name), want[i], rtol=1e-5, atol=1e-6)


def test_imported_model_fine_tunes(onnx_file):
    path, inits = onnx_file
    m = mn.load_onnx(path, dims={"N": BATCH})
    g = m.graph
    logits = g.outputs[0]
    labels = g.input("labels", [BATCH, 3])
    g.set_outputs([g.cross_entropy_loss(logits, labels)])

    ids, x = data()
    cls = np.arange(BATCH) % 3
    onehot = np.eye(3, dtype=np.float32)[cls]
    # the loss of the untrained model, from onnxruntime's logits: the session must start at the initializers
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["logits"], {"ids": ids, "x": x})[0]
    ref = ref.astype(np.float64)
    logp = ref - ref.max(1, keepdims=True) - np.log(np.exp(ref - ref.max(1, keepdims=True)).sum(1, keepdims=True))
    want_first = -(onehot * logp).sum(1).mean()

    config = mn.SessionConfig.from_env()
    config.optimizer = mn.Optimizer.SGD
    config.learning_rate = 0.3
    config.keep_gradients = True  # read_gradient below
    s = m.build(config)
    s.set_input("ids", ids)
    s.set_input("x", x)
    s.set_input("labels", onehot)
    s.run()
    first = float(s.read_output(0).reshape(-1)[0])
    assert first == pytest.approx(want_first, rel=1e-4)
    for _ in range(30):
        s.run()
    last = float(s.read_output(0).reshape(-1)[0])
    assert last < 0.5 * first, (first, last)
    moved = np.abs(s.read_parameter("fc1.weight") - inits["fc1.weight"]).sum()
    assert moved > 1e-3
    assert s.read_gradient("fc1.weight").shape == (16, 8)
    # the Trainer takes an imported model's session like any other; load_initializers resets it
    m.load_initializers(s)
    np.testing.assert_array_equal(s.read_parameter("fc1.weight"), inits["fc1.weight"])
    t = mn.Trainer(s, mn.TrainConfig(epochs=3, batch_size=BATCH, progress=False))
    loader = mn.DataLoader({"ids": np.tile(ids.astype(np.int32), 4), "x": np.tile(x, (4, 1)),
                            "labels": np.tile(onehot, (4, 1))}, batch_size=BATCH, seed=2)
    history = t.train(loader)
    assert history[-1]["train_loss"] < history[0]["train_loss"]


def test_unsupported_and_unbound_are_value_errors(tmp_path):
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")
    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "bad.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(ValueError, match="NoSuchOp"):
        mn.load_onnx(path)
    good = str(tmp_path / "tiny.onnx")
    write_model(good)
    with pytest.raises(ValueError, match="N"):
        mn.load_onnx(good)  # the symbolic batch is not bound


def test_importing_meganeura_first_leaves_onnxruntime_working():
    # The module exports only its init function (python/exports.map); when it exported its static libstdc++
    # and shader toolchain, this import order crashed inside onnxruntime.
    import subprocess
    import sys

    code = "import meganeura, onnxruntime, numpy as np; print(onnxruntime.get_device())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
