#!/usr/bin/env python3
"""Writes the ONNX backend node test cases of the pinned PyPI `onnx` (scripts/requirements-oracle.txt) as files:
OUT/cases.tsv (case, op under test), OUT/<case>/model.onnx and OUT/<case>/test_data_set_N/{input,output}_K.pb, the layout of onnx's own
`backend/test/data/node` (which recent wheels no longer ship: they ship the generators instead). Expected
outputs come from onnx's case generators (numpy and onnx.reference), never from meganeura.

usage: scripts/onnx_node_cases.py OUT   (default OUT: .models/onnx-node)
Cases whose inputs or outputs are not plain tensors (sequences, maps, optionals) are written without data
and listed in OUT/skipped.txt with the reason, so the driver reports them instead of losing them silently.
"""
import os
import shutil
import sys

import onnx
from onnx import TensorProto, numpy_helper
import onnx.backend.test.case.node as node_test


def write_tensor(path, value, name):
    if isinstance(value, TensorProto):
        data = value.SerializeToString()
    else:
        data = numpy_helper.from_array(value, name).SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".models/onnx-node"
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    skipped = []
    # The op under test of every case (an expanded case's graph holds the op's function body instead).
    op_of = {}
    original = node_test.expect

    def expect(node, inputs, outputs, name, **kwargs):
        before = len(node_test._NodeTestCases)
        original(node, inputs, outputs, name, **kwargs)
        for case in node_test._NodeTestCases[before:]:
            op_of[case.name] = node.op_type if node.domain in ("", "ai.onnx") else node.domain + "." + node.op_type

    node_test.expect = expect  # the case modules import it by name when collect_testcases imports them
    cases = node_test.collect_testcases()
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("".join(f"{c.name}\t{op_of.get(c.name, '?')}\n" for c in cases))
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        plain = all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output))
        if not plain:
            skipped.append(f"{case.name}\tinput or output is not a tensor (sequence, map or optional)")
            continue
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds)
            for j, value in enumerate(inputs):
                write_tensor(os.path.join(ds, f"input_{j}.pb"), value, graph.input[j].name)
            for j, value in enumerate(outputs):
                write_tensor(os.path.join(ds, f"output_{j}.pb"), value, graph.output[j].name)
    with open(os.path.join(out, "skipped.txt"), "w") as f:
        f.write("".join(s + "\n" for s in skipped))
    print(f"onnx {onnx.__version__}: {len(cases)} node cases in {out}, {len(skipped)} without tensor data")


if __name__ == "__main__":
    main()
