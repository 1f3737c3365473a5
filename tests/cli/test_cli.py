#!/usr/bin/env python3
"""The product surface from the outside: `meganeura <command> --help` (exit 0, usage on stdout), unknown flags
and values rejected (exit 2, the valid options named), the examples' --help, `train --json` (one JSON object
per line) with --save and --resume, progress as plain lines off a terminal and a redrawn bar with steps/s and ETA
on one (a pseudo-terminal), `checkpoint inspect|convert` checked against PyPI safetensors, `generate` (greedy
token ids against an independent numpy forward of a tiny Hugging Face folder and of a tiny GGUF file read by PyPI
gguf), `run` against onnxruntime on a model the onnx package builds, and `inspect` against what onnx, gguf and
safetensors themselves read from the same files.

usage: test_cli.py BIN_DIR   (trains on 256 Fashion-MNIST images on the first Vulkan device; a few seconds)"""
import json
import os
import pty
import subprocess
import sys
import tempfile
import unittest

import numpy as np

BIN = sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin"
MEGANEURA = os.path.join(BIN, "meganeura")
TRAIN = ["train", "--limit", "256", "--batch", "32", "--optimizer", "adam"]
ORACLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "oracle")
sys.path.insert(0, ORACLE)


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([*args], capture_output=True, text=True, env=e, timeout=600)


def slurp(path):
    with open(path) as f:
        return f.read()


def json_lines(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return [json.loads(l) for l in lines]  # every line must be a JSON object


class Help(unittest.TestCase):
    COMMANDS = {"info": [], "train": [], "profile": [], "checkpoint": [], "checkpoint inspect": [],
                "checkpoint convert": [], "generate": [], "run": [], "inspect": []}

    def test_top_level_lists_every_command(self):
        r = run(MEGANEURA, "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("info", "train", "profile", "checkpoint", "generate", "run", "inspect"):
            self.assertIn(f"  {name} ", r.stdout)
        r = run(MEGANEURA)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: meganeura <command>", r.stderr)
        self.assertEqual(run(MEGANEURA, "--version").stdout.split()[0], "meganeura")

    def test_every_command_has_help(self):
        for cmd in self.COMMANDS:
            with self.subTest(cmd=cmd):
                r = run(MEGANEURA, *cmd.split(), "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(r.stdout.startswith(f"usage: meganeura {cmd}"), r.stdout[:200])
                self.assertEqual(r.stderr, "")
                self.assertEqual(run(MEGANEURA, "help", *cmd.split()[:1]).returncode, 0)

    def test_unknown_flags_and_bad_values_are_rejected_with_the_valid_options(self):
        r = run(MEGANEURA, "train", "--epoch", "3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("got '--epoch'", r.stderr)
        for valid in ("--epochs", "--resume", "--precision", "--json", "--help"):
            self.assertIn(valid, r.stderr.split("\n")[0])
        cases = [(["train", "--epochs", "3x"], "expected a whole number for --epochs, got '3x'"),
                 (["train", "--precision", "fp8"], "expected --precision to be one of f32, mixed16, f16, bf16, got 'fp8'"),
                 (["train", "--model", "resnet"], "expected --model to be one of mlp|cnn, got 'resnet'"),
                 (["train", "--lr"], "expected a value (X) after --lr, got none"),
                 (["train", "--json=1"], "expected no value for --json"),
                 (["info", "extra"], "got also 'extra'"),
                 (["checkpoint", "inspect"], "expected the argument FILE, got none"),
                 (["checkpoint", "squash"], "expected one of the subcommands inspect, convert, got 'squash'"),
                 (["frobnicate"], "expected one of the commands checkpoint, generate, info, inspect, profile, run, "
                                  "train"),
                 (["generate", "-p", "hi"], "expected MODEL or --hf ORG/NAME, got neither"),
                 (["generate", "m.gguf", "--hf", "a/b", "-p", "x"], "expected MODEL or --hf, got both"),
                 (["generate", "m.gguf", "-p", "x", "--top-p", "0"], "expected --top-p in (0, 1], got 0"),
                 (["generate", "m.gguf", "--temprature", "1"], "got '--temprature'"),
                 (["run", "m.onnx", "--input", "x"], "expected --input NAME=FILE.npy, got 'x'"),
                 (["inspect"], "expected the argument FILE, got none"),
                 (["profile", "--iterations", "0"], "expected --iterations >= 1, got 0")]
        for args, message in cases:
            with self.subTest(args=args):
                r = run(MEGANEURA, *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)

    def test_precision_from_the_environment_is_checked(self):
        r = run(MEGANEURA, "train", "--help", env={"MEGANEURA_PRECISION": "mixed16"})
        self.assertIn("(default mixed16)", r.stdout)
        r = run(MEGANEURA, "train", "--limit", "32", env={"MEGANEURA_PRECISION": "half"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("expected MEGANEURA_PRECISION to be one of f32, mixed16, f16, bf16", r.stderr)
        # f16 / bf16 are 16-bit weights for inference: a training session refuses them by name.
        for p in ("f16", "bf16"):
            r = run(MEGANEURA, *TRAIN, "--epochs", "1", "--precision", p)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("expected precision f32 or mixed16 for a training session", r.stderr)
            self.assertIn("got " + p, r.stderr)

    def test_examples_parse_their_flags(self):
        for tool in ("mnist", "train_deploy", "profile_session", "pipeline_stats", "debug_tour", "smollm2"):
            with self.subTest(tool=tool):
                r = run(os.path.join(BIN, tool), "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(r.stdout.startswith(f"usage: {tool}"), r.stdout[:200])
                r = run(os.path.join(BIN, tool), "--no-such-flag")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("got '--no-such-flag'", r.stderr)
                self.assertIn("--help", r.stderr)


class Train(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.ckpt = os.path.join(self.dir.name, "mlp.ckpt")

    def tearDown(self):
        self.dir.cleanup()

    def test_json_save_resume_inspect_convert(self):
        r = run(MEGANEURA, *TRAIN, "--epochs", "1", "--save", self.ckpt, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json_lines(r.stdout)
        self.assertEqual([e["event"] for e in events], ["epoch", "done"])
        first, done = events
        self.assertEqual((first["epoch"], first["steps"]), (1, 8))
        self.assertGreater(first["steps_per_s"], 0)
        self.assertTrue(0.0 <= first["test_accuracy"] <= 1.0)
        self.assertEqual((done["epochs_done"], done["precision"]), (1, "f32"))
        self.assertLess(first["train_loss"], 2.302585)  # below chance: the run learned something

        # --resume trains only the epochs the checkpoint lacks.
        r = run(MEGANEURA, *TRAIN, "--epochs", "2", "--resume", self.ckpt, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json_lines(r.stdout)
        self.assertEqual([e["event"] for e in events], ["resumed", "epoch", "done"])
        self.assertEqual(events[0]["epochs_done"], 1)
        self.assertEqual(events[0]["parameters"], 4)
        self.assertEqual(events[1]["epoch"], 2)
        self.assertEqual(events[2]["epochs_done"], 2)
        r = run(MEGANEURA, *TRAIN, "--epochs", "1", "--resume", self.ckpt, "--json")
        self.assertEqual(json_lines(r.stdout)[-1], {"event": "done", "epochs_done": 1, "epochs_trained": 0})
        # A checkpoint of another model is refused before anything is trained.
        r = run(MEGANEURA, *TRAIN, "--model", "cnn", "--resume", self.ckpt)
        self.assertEqual(r.returncode, 1)
        self.assertIn("meganeura train:", r.stderr)

        r = run(MEGANEURA, "checkpoint", "inspect", self.ckpt, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        head, *tensors = json_lines(r.stdout)
        self.assertEqual((head["format"], head["metadata"]["epochs_done"], head["metadata"]["optimizer"]),
                         ("meganeura", "1", "adam"))
        shapes = {t["name"]: t["shape"] for t in tensors if t["role"] == "parameter"}
        self.assertEqual(shapes, {"w1": [784, 128], "b1": [128], "w2": [128, 10], "b2": [10]})
        self.assertEqual(head["tensors"], len(tensors))
        self.assertGreater(len(tensors), 4)  # Adam's moments

        st = os.path.join(self.dir.name, "mlp.safetensors")
        self.assertEqual(run(MEGANEURA, "checkpoint", "convert", self.ckpt, st).returncode, 0)
        from safetensors.numpy import load_file  # the oracle: PyPI safetensors reads what we wrote
        arrays = load_file(st)
        self.assertEqual({k: list(v.shape) for k, v in arrays.items()}, shapes)
        back = os.path.join(self.dir.name, "back.ckpt")
        r = run(MEGANEURA, "checkpoint", "convert", st, back)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run(MEGANEURA, "checkpoint", "inspect", back, "--json")
        self.assertEqual({t["name"] for t in json_lines(r.stdout)[1:]}, set(shapes))
        r = run(MEGANEURA, "checkpoint", "convert", self.ckpt, back)
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected one side to be a .safetensors file", r.stderr)
        r = run(MEGANEURA, "checkpoint", "inspect", os.path.join(self.dir.name, "missing.ckpt"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing.ckpt", r.stderr)

    def test_progress_is_plain_lines_off_a_terminal(self):
        r = run(MEGANEURA, *TRAIN, "--epochs", "1", "--progress", "lines")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\r", r.stderr)
        self.assertRegex(r.stderr, r"epoch 1/1 step 8/8 loss \d+\.\d+ \d+\.\d steps/s ETA \d+:\d\d\n")
        r = run(MEGANEURA, *TRAIN, "--epochs", "1")  # auto: stderr is a pipe here
        self.assertNotIn("\r", r.stderr)
        self.assertIn("steps/s ETA", r.stderr)

    def test_progress_is_a_bar_on_a_terminal(self):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(MEGANEURA, [MEGANEURA, *TRAIN, "--epochs", "1"])
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, out.decode(errors="replace"))
        text = out.decode(errors="replace")
        self.assertIn("\r", text)
        self.assertRegex(text, r"epoch 1/1 \[[#.]{30}\] \d+/8 \d+\.\d steps/s loss \d+\.\d+ ETA \d+:\d\d")


def numpy_greedy(forward, ids, steps, eos):
    """Greedy continuation by a full float64 forward at every step; stops at the first near-tie (top two
    logits closer than 1e-4: f32 on the GPU may pick either), returning the tokens up to it and whether a tie
    cut it short."""
    ids, out = list(ids), []
    for _ in range(steps):
        logits = forward(ids)[-1]
        top = np.sort(logits)[-2:]
        if top[1] - top[0] < 1e-4:
            return out, True
        t = int(np.argmax(logits))
        if t in eos:
            break
        out.append(t)
        ids.append(t)
    return out, False


class Generate(unittest.TestCase):
    """`meganeura generate` on a tiny random Hugging Face folder (hf_tiny_model.py: safetensors, tokenizers) and
    a tiny GGUF file (gguf_llama_oracle.py: PyPI gguf's writer, quantized tensors, an SPM vocabulary)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.hf = os.path.join(cls.dir.name, "hf")
        cls.gguf_dir = os.path.join(cls.dir.name, "gguf")
        # f16-sharded: two shards and an index, f16 weights, an untied head; its greedy tokens vary (the f32
        # variant repeats one token for this prompt, which would test little).
        for args in (["hf_tiny_model.py", cls.hf, "f16-sharded"], ["gguf_llama_oracle.py", cls.gguf_dir]):
            r = run(sys.executable, os.path.join(ORACLE, args[0]), *args[1:])
            assert r.returncode == 0, r.stderr
        cls.gguf = os.path.join(cls.gguf_dir, "llama_mixed.gguf")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def generate_json(self, model, prompt, n, *extra):
        r = run(MEGANEURA, "generate", model, "-p", prompt, "-n", str(n), "--json", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        (j,) = json_lines(r.stdout)
        return j

    def test_hf_folder_greedy_equals_numpy(self):
        import hf_tiny_model
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        with open(os.path.join(self.hf, "config.json")) as f:
            cfg = json.load(f)
        W = {}
        for shard in sorted(n for n in os.listdir(self.hf) if n.endswith(".safetensors")):
            W.update({k: v.astype(np.float64) for k, v in load_file(os.path.join(self.hf, shard)).items()})
        prompt = "Hello, tiny world! 42 cats sat."
        j = self.generate_json(self.hf, prompt, 8)
        self.assertEqual(j["prompt_ids"], Tokenizer.from_file(os.path.join(self.hf, "tokenizer.json")).encode(prompt).ids)
        want, tie = numpy_greedy(lambda ids: hf_tiny_model.forward(cfg, W, ids), j["prompt_ids"], 8, {0, 2})
        self.assertGreaterEqual(len(want), 4, "a near-tie came early" if tie else "the oracle stopped early")
        self.assertGreater(len(set(want)), 2)  # a sequence, not one token repeated
        self.assertEqual(j["tokens"][:len(want)], want, "near-tie cut the comparison" if tie else "")
        self.assertEqual((j["precision"], j["architecture"]), ("f32", "llama"))
        self.assertGreater(j["prompt_tokens_per_s"], 0)
        # Streamed text: the prompt, then exactly the pieces whose concatenation --json reports; rates on stderr.
        r = run(MEGANEURA, "generate", self.hf, "-p", prompt, "-n", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, prompt + j["text"] + "\n")
        self.assertRegex(r.stderr, r"prompt \d+ tokens, [\d.]+ tokens/s; generation \d+ tokens, [\d.]+ tokens/s")
        # --chat wraps the prompt in the folder's ChatML template (tokenizer_config.json).
        c = self.generate_json(self.hf, "hi", 2, "--chat")
        self.assertEqual(c["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        # Same seed, same sampled text; the f16 storage policy still runs (weights rounded to f16).
        a = self.generate_json(self.hf, prompt, 6, "--temperature", "0.9", "--top-k", "20", "--seed", "7")
        b = self.generate_json(self.hf, prompt, 6, "--temperature", "0.9", "--top-k", "20", "--seed", "7")
        self.assertEqual(a["tokens"], b["tokens"])
        h = self.generate_json(self.hf, prompt, 4, "--precision", "f16")
        self.assertEqual(h["precision"], "f16")
        self.assertEqual(len(h["tokens"]) > 0 or h["finish"] == "stop", True)

    def test_gguf_greedy_equals_numpy_of_the_dequantized_file(self):
        from gguf import GGUFReader, quants
        from llama_numpy import forward
        reader = GGUFReader(self.gguf)
        with open(os.path.join(self.gguf_dir, "llama_mixed.json")) as f:
            c = json.load(f)["config"]
        W = {}
        for t in reader.tensors:
            shape = [int(d) for d in reversed(t.shape)]  # GGUF dims are innermost first
            v = quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
            leaf = t.name.split(".")[-2]
            if leaf in ("attn_q", "attn_k"):  # undo llama.cpp's per-head row permutation
                heads = c["heads"] if leaf == "attn_q" else c["kv_heads"]
                v = v.reshape(heads, v.shape[0] // heads // 2, 2, *v.shape[1:]).swapaxes(1, 2).reshape(v.shape)
            W[t.name] = v.reshape(-1)
        j = self.generate_json(self.gguf, "a b c aa", 6)
        self.assertEqual(j["architecture"], "llama")
        want, tie = numpy_greedy(lambda ids: forward(c, W, ids), j["prompt_ids"], 6, {2})
        self.assertGreater(len(want) + int(tie), 0)
        self.assertEqual(j["tokens"][:len(want)], want, "near-tie cut the comparison" if tie else "")

    def test_hub_id_through_a_local_hub(self):
        """--hf ORG/NAME against tests/hub/hub_server.py (the hub's URL layout on 127.0.0.1) serving the same folder:
        the same tokens as the folder itself, then again offline from the Hugging Face cache."""
        import shutil
        import time
        root, home = os.path.join(self.dir.name, "hub-root"), os.path.join(self.dir.name, "hf-home")
        commit = "c0ffee" * 6 + "abcd"
        shutil.copytree(self.hf, os.path.join(root, "org", "tiny", commit))
        os.makedirs(os.path.join(root, "org", "tiny", "refs"))
        with open(os.path.join(root, "org", "tiny", "refs", "main"), "w") as f:
            f.write(commit)
        port_file = os.path.join(self.dir.name, "port")
        server = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(ORACLE), "hub", "hub_server.py"),
                                   "--root", root, "--port-file", port_file, "--log", os.path.join(self.dir.name, "log"),
                                   "--manifest", os.path.join(self.dir.name, "manifest.json"), "--mode", "normal",
                                   "--lifetime", "300"])
        try:
            for _ in range(200):
                if os.path.exists(port_file) and slurp(port_file).strip():
                    break
                time.sleep(0.05)
            env = {"HF_HOME": home, "HF_ENDPOINT": "http://127.0.0.1:" + slurp(port_file).strip(),
                   "HF_HUB_OFFLINE": "0"}
            prompt = "the quick brown fox"
            want = self.generate_json(self.hf, prompt, 4)["tokens"]
            r = run(MEGANEURA, "generate", "--hf", "org/tiny", "-p", prompt, "-n", "4", "--json", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json_lines(r.stdout)[0]["tokens"], want)
            r = run(MEGANEURA, "generate", "--hf", "org/tiny", "--revision", "nope", "-p", prompt, env=env)
            self.assertEqual(r.returncode, 1)
            self.assertIn("nope", r.stderr)
        finally:
            server.terminate()
            server.wait()
        r = run(MEGANEURA, "generate", "--hf", "org/tiny", "-p", prompt, "-n", "4", "--json",
                env=dict(env, HF_HUB_OFFLINE="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json_lines(r.stdout)[0]["tokens"], want)

    def test_bad_models_are_named(self):
        r = run(MEGANEURA, "generate", os.path.join(self.hf, "config.json"), "-p", "x")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a GGUF file", r.stderr)
        r = run(MEGANEURA, "generate", "no/such-model", "-p", "x", env={"HF_HUB_OFFLINE": "1",
                                                                         "HF_HOME": self.dir.name})
        self.assertEqual(r.returncode, 1)
        self.assertIn("no/such-model", r.stderr)


def onnx_model(path, extra_node=None):
    """x [batch, 4] -> relu(x @ W + b) = h -> softmax(h) = y, with initializers W [4, 5] and b [5]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    W = numpy_helper.from_array(rng.normal(size=(4, 5)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.normal(size=(5,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"), helper.make_node("Add", ["xw", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5]),
               helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", 5])]
    if extra_node is not None:
        nodes.append(extra_node)
        outputs.append(helper.make_tensor_value_info(extra_node.output[0], TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              outputs, [W, b])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return m


class RunAndInspect(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.model = os.path.join(self.dir.name, "mlp.onnx")
        onnx_model(self.model)

    def tearDown(self):
        self.dir.cleanup()

    def test_run_equals_onnxruntime(self):
        import onnxruntime as ort
        x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
        xf = os.path.join(self.dir.name, "x.npy")
        np.save(xf, x)
        out = os.path.join(self.dir.name, "out")
        r = run(MEGANEURA, "run", self.model, "--input", "x=" + xf, "--output-dir", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        (j,) = json_lines(r.stdout)
        self.assertEqual([(o["name"], o["shape"]) for o in j["outputs"]], [("y", [3, 5]), ("h", [3, 5])])
        want = ort.InferenceSession(self.model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
        for name, w in zip(("y", "h"), want):
            got = np.load(os.path.join(out, name + ".npy"))  # numpy reads what write_npy wrote
            self.assertEqual(got.dtype, np.float32)
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6, err_msg=name)
        # Errors: a bad .npy names the file, a missing input lists what is expected, f16 storage is refused.
        bad = os.path.join(self.dir.name, "bad.npy")
        with open(bad, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<c8'}")
        r = run(MEGANEURA, "run", self.model, "--input", "x=" + bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.npy", r.stderr)
        r = run(MEGANEURA, "run", self.model)
        self.assertEqual(r.returncode, 1)
        self.assertIn("expected --input x=FILE.npy", r.stderr)
        r = run(MEGANEURA, "run", self.model, "--input", "z=" + xf)
        self.assertEqual(r.returncode, 1)
        self.assertIn("got 'z'", r.stderr)
        r = run(MEGANEURA, "run", self.model, "--input", "x=" + xf, "--precision", "f16")
        self.assertEqual(r.returncode, 1)
        self.assertIn("expected --precision f32 or mixed16 for an ONNX model", r.stderr)

    def inspect(self, path):
        r = run(MEGANEURA, "inspect", path, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        (j,) = json_lines(r.stdout)
        return j

    def test_inspect_onnx_against_the_onnx_package(self):
        from onnx import helper
        m = onnx_model(self.model, helper.make_node("Foo", ["h"], ["z"], domain="com.example", name="foo"))
        j = self.inspect(self.model)
        self.assertEqual(j["format"], "onnx")
        self.assertEqual([(i["name"], i["shape"]) for i in j["inputs"]], [("x", [-1, 4])])
        self.assertEqual([o["name"] for o in j["outputs"]], [o.name for o in m.graph.output])
        self.assertEqual({p["name"]: p["shape"] for p in j["parameters"]},
                         {t.name: list(t.dims) for t in m.graph.initializer})
        hist = {}
        for n in m.graph.node:
            op = (n.domain + "." if n.domain else "") + n.op_type
            hist[op] = hist.get(op, 0) + 1
        self.assertEqual(j["ops"], hist)
        self.assertEqual(j["unsupported"], ["com.example.Foo (op)"])
        self.assertEqual(j["facts"]["opset ai.onnx"], "17")
        r = run(MEGANEURA, "inspect", self.model)
        self.assertIn("unsupported (1):", r.stdout)

    def test_inspect_nnef_folder_names_its_unsupported_op(self):
        # A hand-written NNEF graph (the standard's syntax): one supported and one unsupported operation.
        folder = os.path.join(self.dir.name, "nnef")
        os.makedirs(folder)
        with open(os.path.join(folder, "graph.nnef"), "w") as f:
            f.write("version 1.0;\n\ngraph G( x ) -> ( y )\n{\n"
                    "    x = external<scalar>(shape = [2, 4]);\n    h = relu(x);\n"
                    "    y = box(h, size = [1, 1, 1, 1]);\n}\n")
        j = self.inspect(folder)
        self.assertEqual(j["format"], "nnef")
        self.assertEqual([(i["name"], i["shape"]) for i in j["inputs"]], [("x", [2, 4])])
        self.assertEqual([(o["name"], o["shape"]) for o in j["outputs"]], [("y", [-1])])  # shape unknown: box
        self.assertEqual(j["ops"].get("relu"), 1)
        self.assertEqual(len(j["unsupported"]), 1)
        self.assertTrue(j["unsupported"][0].startswith("box at 'y'"), j["unsupported"])
        j2 = self.inspect(os.path.join(folder, "graph.nnef"))  # the file itself selects the same reader
        self.assertEqual(j2["unsupported"], j["unsupported"])

    def test_inspect_gguf_safetensors_and_hf_folder(self):
        from gguf import GGUFReader
        from safetensors.numpy import load_file
        g, hf = os.path.join(self.dir.name, "gguf"), os.path.join(self.dir.name, "hf")
        for args in (["gguf_llama_oracle.py", g], ["hf_tiny_model.py", hf, "f32"]):
            r = run(sys.executable, os.path.join(ORACLE, args[0]), *args[1:])
            self.assertEqual(r.returncode, 0, r.stderr)
        path = os.path.join(g, "llama_mixed.gguf")
        j = self.inspect(path)
        reader = GGUFReader(path)
        self.assertEqual({p["name"]: (p["shape"], p["dtype"]) for p in j["parameters"]},
                         {t.name: ([int(d) for d in reversed(t.shape)], t.tensor_type.name)
                          for t in reader.tensors})
        self.assertEqual((j["format"], j["facts"]["architecture"], j["unsupported"]), ("gguf", "llama", []))
        self.assertEqual([i["name"] for i in j["inputs"]], ["tokens", "start", "last"])
        self.assertGreater(j["ops"]["matmul"], 0)
        st = os.path.join(hf, "model.safetensors")
        j = self.inspect(st)
        self.assertEqual({p["name"]: p["shape"] for p in j["parameters"]},
                         {k: list(v.shape) for k, v in load_file(st).items()})
        j = self.inspect(hf)
        self.assertEqual((j["format"], j["facts"]["architecture"], j["unsupported"]), ("huggingface", "llama", []))
        r = run(MEGANEURA, "inspect", os.path.join(hf, "tokenizer.json"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("expected a model in one of the formats onnx, gguf, safetensors, nnef, huggingface", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
