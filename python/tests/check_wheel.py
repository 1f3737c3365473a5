#!/usr/bin/env python3
"""The wheel from the outside: `pip wheel` (scikit-build-core, pyproject.toml) offline and without build isolation,
the wheel installed into a fresh venv (--system-site-packages, so NumPy comes along), then an import and a small
training run there, away from the source and build trees. Any failure exits non-zero (ctest python_wheel).

    check_wheel.py --scratch DIR [--library build/lib/libmeganeura.a] [--source ROOT]

--library links that prebuilt archive of this tree (cmake.define MEGANEURA_PYTHON_LIBRARY) so that the wheel costs
the bindings' compile only; without it the wheel builds the whole library from source (scripts/check-wheel.sh
--from-source, ~20 minutes on two cores). ccache is used when it is on PATH.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time
import zipfile

SMOKE = r"""
import os, sys
import numpy as np
import meganeura as mn
here = os.path.realpath(mn.__file__)
assert here.startswith(os.path.realpath(sys.prefix)), ("imported from outside the venv", here)
assert mn.__version__ == sys.argv[1], (mn.__version__, sys.argv[1])
g = mn.Graph()
x = g.input("x", [8, 4]); labels = g.input("labels", [8, 2])
h = g.relu(g.matmul(x, g.parameter("w1", [4, 16])))
g.set_outputs([g.cross_entropy_loss(g.matmul(h, g.parameter("w2", [16, 2])), labels)])
config = mn.SessionConfig.from_env()
config.optimizer = mn.Optimizer.Adam
config.learning_rate = 0.05
trainer = mn.Trainer(mn.build(g, config), mn.TrainConfig(epochs=6, batch_size=8, progress=False))
rng = np.random.default_rng(0)
cls = np.arange(64) % 2
xs = rng.normal(0, 0.3, (64, 4)).astype(np.float32)
xs[:, 0] += 2.0 * cls
xs[:, 3] = 1.0
history = trainer.train(mn.DataLoader({"x": xs, "labels": np.eye(2, dtype=np.float32)[cls]}, batch_size=8))
first, last = history[0]["train_loss"], history[-1]["train_loss"]
assert last < 0.5 * first, history
print("wheel smoke: meganeura %s from %s on %s, loss %.4f -> %.4f" % (mn.__version__, here, trainer.session.device, first, last))
"""


def run(cmd, **kw):
    print("+ " + " ".join("'<smoke script>'" if "\n" in c else c for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--library", default="")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args()
    scratch = os.path.abspath(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")

    dist = os.path.join(scratch, "dist")
    cmd = [sys.executable, "-m", "pip", "wheel", args.source, "--no-build-isolation", "--no-deps", "--no-index",
           "--disable-pip-version-check", "-w", dist, "-C", "build-dir=" + os.path.join(scratch, "build")]
    if args.library:
        if not os.path.isfile(args.library):
            sys.exit("check_wheel: --library %s: no such file (build the meganeura target first)" % args.library)
        cmd += ["-C", "cmake.define.MEGANEURA_PYTHON_LIBRARY=" + os.path.abspath(args.library)]
    t0 = time.time()
    run(cmd, env=env)
    built = time.time() - t0
    wheels = glob.glob(os.path.join(dist, "meganeura-*.whl"))
    if len(wheels) != 1:
        sys.exit("check_wheel: expected one meganeura wheel in %s, got %s" % (dist, os.listdir(dist)))
    wheel = wheels[0]
    names = zipfile.ZipFile(wheel).namelist()
    version = os.path.basename(wheel).split("-")[1]
    for want in ("meganeura/__init__.py", "meganeura/_meganeura"):
        if not any(n.startswith(want) for n in names):
            sys.exit("check_wheel: %s lacks %s (it holds %s)" % (wheel, want, names))

    venv = os.path.join(scratch, "venv")
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=env)
    py = os.path.join(venv, "bin", "python")
    run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", wheel], env=env)
    run([py, "-c", SMOKE, version], env=env, cwd=scratch)
    print("check_wheel: %s (%d files) built in %.0f s, installed and trained in a fresh venv"
          % (os.path.basename(wheel), len(names), built))


if __name__ == "__main__":
    main()
