"""The Python module against NumPy: graphs, a session's step, the Trainer. Runs on the first Vulkan device
(lavapipe in CI). PYTHONPATH must hold build/python (ctest sets it)."""
import math

import numpy as np
import pytest

import meganeura as mn


def mlp(batch=8):
    g = mn.Graph()
    x = g.input("x", [batch, 6])
    labels = g.input("labels", [batch, 3])
    w1 = g.parameter("w1", [6, 16])
    h = g.relu(g.matmul(x, w1))
    w2 = g.parameter("w2", [16, 3])
    logits = g.named(g.matmul(h, w2), "logits")
    loss = g.cross_entropy_loss(logits, labels)
    return g, loss, logits


def test_graph_errors_are_value_errors():
    g = mn.Graph()
    a = g.input("a", [2, 3])
    b = g.input("b", [4, 5])
    with pytest.raises(ValueError, match="matmul"):
        g.matmul(a, b)
    assert g.shape(g.matmul(a, g.input("c", [3, 7]))) == [2, 7]


def test_inference_step_matches_numpy():
    g = mn.Graph()
    x = g.input("x", [4, 6])
    w = g.parameter("w", [6, 5])
    g.set_outputs([g.relu(g.matmul(x, w))])
    s = mn.build_inference_session(g)
    rng = np.random.default_rng(1)
    xv = rng.uniform(-1, 1, (4, 6)).astype(np.float32)
    wv = s.read_parameter("w")  # seeded by the default rule: U(+-1/sqrt(6))
    assert wv.shape == (6, 5)
    assert 0 < np.abs(wv).max() <= 1 / math.sqrt(6)
    s.set_input("x", xv)
    s.run()
    y = s.read_output(0)
    assert y.shape == (4, 5)
    np.testing.assert_allclose(y, np.maximum(xv.astype(np.float64) @ wv, 0), rtol=1e-5, atol=1e-6)
    # a non-contiguous float64 view is converted by NumPy, not refused
    s.set_input("x", np.asfortranarray(xv.astype(np.float64)))
    s.run()
    np.testing.assert_allclose(s.read_output(0), y, rtol=1e-6)
    with pytest.raises(RuntimeError, match="set_input"):
        s.set_input("nope", xv)


def test_trainer_learns_from_numpy_arrays():
    g, loss, _ = mlp()
    g.set_outputs([loss])
    n = 96
    rng = np.random.default_rng(0)
    cls = np.arange(n) % 3
    xs = rng.normal(0, 0.3, (n, 6)).astype(np.float32)
    xs[np.arange(n), cls] += 2.0
    xs[:, 5] = 1.0
    ys = np.eye(3, dtype=np.float32)[cls]
    config = mn.SessionConfig.from_env()
    config.optimizer = mn.Optimizer.Adam
    config.learning_rate = 0.02
    trainer = mn.Trainer(mn.build(g, config), mn.TrainConfig(epochs=8, batch_size=8, progress=False))
    history = trainer.train(mn.DataLoader({"x": xs, "labels": ys}, batch_size=8, seed=3))
    assert len(history) == 8
    assert history[-1]["train_loss"] < 0.5 * history[0]["train_loss"], history
    w1 = trainer.session.read_parameter("w1")
    assert w1.shape == (6, 16) and np.isfinite(w1).all()
