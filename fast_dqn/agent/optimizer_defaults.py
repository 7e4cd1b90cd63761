"""Each optimizer's epsilon and loss reduction, as its source used them.

A module of its own, without TensorFlow, so the Config and --help can read it cheaply.
"""

# The epsilon and the loss reduction go together. Centered RMSProp's 0.01, inside the square
# root, is sized for gradients summed over the minibatch: a mean would shrink each update about
# 25 times. Adam keeps the 1e-8 and the mean of the codes it comes from.
# Sources: docs/protocol.md#sources-of-the-constants-and-defaults
OPTIMIZER_DEFAULTS = {"rmsprop": {"epsilon": 0.01, "loss_reduction": "sum"},
                      "adam": {"epsilon": 1e-8, "loss_reduction": "mean"}}
