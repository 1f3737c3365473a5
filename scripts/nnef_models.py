#!/usr/bin/env python3
"""Test models for the NNEF importer: ONNX models built with the `onnx` package, converted to NNEF folders by
PyPI's nnef-tools (scripts/requirements-oracle.txt pins both), plus onnxruntime's outputs on a seeded input.

usage: nnef_models.py OUT_DIR
For each model NAME writes OUT_DIR/NAME.onnx, OUT_DIR/NAME.nnef/ (graph.nnef + .dat files),
OUT_DIR/NAME.input.bin and OUT_DIR/NAME.output.bin (float32, C order) and OUT_DIR/NAME.shapes
("input d0 d1 ..." / "output d0 d1 ..." lines)."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1234)


def init(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inputs, outputs, inits, name):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp():
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1),
        helper.make_node("Relu", ["h1"], ["a1"]),
        helper.make_node("MatMul", ["a1", "w2"], ["h2"]),
        helper.make_node("Add", ["h2", "b2"], ["h3"]),
        helper.make_node("Tanh", ["h3"], ["a2"]),
        helper.make_node("Gemm", ["a2", "w3", "b3"], ["h4"], transB=1),
        helper.make_node("Sigmoid", ["h4"], ["y"]),
    ]
    inits = [init("w1", 16, 8), init("b1", 16), init("w2", 16, 12), init("b2", 12), init("w3", 4, 12),
             init("b3", 4)]
    return model(nodes, [vi("x", [3, 8])], [vi("y", [3, 4])], inits, "mlp")


def cnn():
    scale = numpy_helper.from_array((rng.random(6) + 0.5).astype(np.float32), "bn_scale")
    bias = init("bn_bias", 6)
    mean = init("bn_mean", 6, scale=0.1)
    var = numpy_helper.from_array((rng.random(6) + 0.5).astype(np.float32), "bn_var")
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"],
                         epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("AveragePool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["p2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fcw", "fcb"], ["y"], transB=1),
    ]
    inits = [init("c1w", 6, 3, 3, 3), init("c1b", 6), scale, bias, mean, var, init("c2w", 8, 6, 3, 3),
             init("c2b", 8), numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi"), init("fcw", 5, 8), init("fcb", 5)]
    return model(nodes, [vi("x", [2, 3, 12, 12])], [vi("y", [2, 5])], inits, "cnn")


def shapes():
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),                      # [2,6,8] x [8,12] -> [2,6,12]
        helper.make_node("Reshape", ["h", "shape1"], ["r"]),                # [2,6,3,4]
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),     # [2,3,6,4]
        helper.make_node("Softmax", ["t"], ["s"], axis=-1),
        helper.make_node("Exp", ["t"], ["e"]),
        helper.make_node("Concat", ["s", "e"], ["c"], axis=3),              # [2,3,6,8]
        helper.make_node("ReduceMean", ["c"], ["m"], axes=[2], keepdims=1),  # [2,3,1,8]
        helper.make_node("Squeeze", ["m", "ax2"], ["q"]),                   # [2,3,8]
        helper.make_node("Unsqueeze", ["q", "ax1"], ["u"]),                 # [2,1,3,8]
        helper.make_node("Mul", ["u", "gain"], ["g"]),
        helper.make_node("Sub", ["g", "shift"], ["d"]),
        helper.make_node("ReduceMax", ["d"], ["mx"], axes=[3], keepdims=0),  # [2,1,3]
        helper.make_node("Split", ["c", "split"], ["c0", "c1"], axis=3),     # [2,3,6,3], [2,3,6,5]
        helper.make_node("ReduceMin", ["c1"], ["cs"], axes=[3], keepdims=0),  # [2,3,6]
        helper.make_node("Pad", ["cs", "pads"], ["pd"], mode="constant"),    # [2,3,8]
        helper.make_node("Div", ["pd", "two"], ["y1"]),
        helper.make_node("Abs", ["c0"], ["ab"]),
        helper.make_node("Sqrt", ["ab"], ["y2"]),
    ]
    inits = [init("w", 8, 12), i64("shape1", [2, 6, 3, 4]), i64("ax2", [2]), i64("ax1", [1]),
             init("gain", 8), init("shift", 3, 1), i64("split", [3, 5]),
             i64("pads", [0, 0, 1, 0, 0, 1]), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    outs = [vi("mx", [2, 1, 3]), vi("y1", [2, 3, 8]), vi("y2", [2, 3, 6, 3])]
    return model(nodes, [vi("x", [2, 6, 8])], outs, inits, "shapes")


MODELS = {"mlp": mlp, "cnn": cnn, "shapes": shapes}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import onnxruntime as ort
    for name, build in MODELS.items():
        m = build()
        path = os.path.join(out, name + ".onnx")
        onnx.save(m, path)
        folder = os.path.join(out, name + ".nnef")
        subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-format", "onnx", "--output-format",
                        "nnef", "--input-model", path, "--output-model", folder, "--keep-io-names"],
                       check=True, stdout=subprocess.DEVNULL)
        shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
        x = rng.standard_normal(shape).astype(np.float32)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ys = sess.run(None, {m.graph.input[0].name: x})
        x.tofile(os.path.join(out, name + ".input.bin"))
        with open(os.path.join(out, name + ".shapes"), "w") as f:
            f.write("input " + " ".join(map(str, x.shape)) + "\n")
            for k, y in enumerate(ys):
                np.asarray(y, np.float32).tofile(os.path.join(out, "%s.output%d.bin" % (name, k)))
                f.write("output " + " ".join(map(str, y.shape)) + "\n")


if __name__ == "__main__":
    main()
