#!/usr/bin/env python3
"""The product surface from the outside: `meganeura <command> --help` (exit 0, usage on stdout), unknown flags
and values rejected (exit 2, the valid options named), the examples' --help, `train --json` (one JSON object
per line) with --save and --resume, progress as plain lines off a terminal and a redrawn bar with steps/s and ETA
on one (a pseudo-terminal), and `checkpoint inspect|convert` checked against PyPI safetensors.

usage: test_cli.py BIN_DIR   (trains on 256 Fashion-MNIST images on the first Vulkan device; a few seconds)"""
import json
import os
import pty
import subprocess
import sys
import tempfile
import unittest

BIN = sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin"
MEGANEURA = os.path.join(BIN, "meganeura")
TRAIN = ["train", "--limit", "256", "--batch", "32", "--optimizer", "adam"]


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([*args], capture_output=True, text=True, env=e, timeout=600)


def json_lines(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return [json.loads(l) for l in lines]  # every line must be a JSON object


class Help(unittest.TestCase):
    COMMANDS = {"info": [], "train": [], "profile": [], "checkpoint": [], "checkpoint inspect": [],
                "checkpoint convert": []}

    def test_top_level_lists_every_command(self):
        r = run(MEGANEURA, "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("info", "train", "profile", "checkpoint"):
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
                 (["train", "--precision", "fp8"], "expected --precision to be one of f32, mixed16, got 'fp8'"),
                 (["train", "--model", "resnet"], "expected --model to be one of mlp|cnn, got 'resnet'"),
                 (["train", "--lr"], "expected a value (X) after --lr, got none"),
                 (["train", "--json=1"], "expected no value for --json"),
                 (["info", "extra"], "got also 'extra'"),
                 (["checkpoint", "inspect"], "expected the argument FILE, got none"),
                 (["checkpoint", "squash"], "expected one of the subcommands inspect, convert, got 'squash'"),
                 (["frobnicate"], "expected one of the commands checkpoint, info, profile, train"),
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
        self.assertIn("expected MEGANEURA_PRECISION to be one of f32, mixed16", r.stderr)

    def test_examples_parse_their_flags(self):
        for tool in ("mnist", "train_deploy", "profile_session", "pipeline_stats", "debug_tour"):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
