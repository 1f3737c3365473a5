"""meganeura: neural-network training and inference on any Vulkan GPU (Python bindings).

    import numpy as np, meganeura as mn
    g = mn.Graph()
    x = g.input("x", [32, 784]); labels = g.input("labels", [32, 10])
    h = g.relu(g.matmul(x, g.parameter("w1", [784, 128])))
    loss = g.cross_entropy_loss(g.matmul(h, g.parameter("w2", [128, 10])), labels)
    g.set_outputs([loss])
    trainer = mn.Trainer(mn.build_session(g), mn.TrainConfig(epochs=10))
    trainer.train(mn.DataLoader({"x": images, "labels": one_hot}, batch_size=32))
"""
from ._meganeura import *  # noqa: F401,F403
from ._meganeura import __version__  # noqa: F401
