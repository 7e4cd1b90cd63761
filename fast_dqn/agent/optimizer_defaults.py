"""Each optimizer's epsilon and loss reduction, as its source used them.

A module of its own, without TensorFlow, so the Config and --help can read it cheaply.
"""

#   rmsprop: the Nature code (Mnih et al. 2015, NeuralQLearner.lua): centered RMSProp,
#            rho 0.95, epsilon 0.01 added inside the square root, gradients summed over the
#            minibatch. Keras's centered RMSprop puts epsilon inside the root too, so with a
#            summed loss one update equals the Lua rule (tests/test_learner.py checks
#            it against a numpy transcription of the Lua rule).
#   adam:    Kingma & Ba's epsilon 1e-8, PyTorch's default, which Lapan's Pong DQN (the
#            pong-quick source; Deep Reinforcement Learning Hands-On, 2nd ed.,
#            Chapter06/02_dqn_pong.py line 142), CleanRL and SB3 keep, with the loss averaged
#            over the minibatch as they do. Lapan averages a squared error (nn.MSELoss(),
#            line 115); the Huber loss here is ours, only the mean reduction is his.
OPTIMIZER_DEFAULTS = {"rmsprop": {"epsilon": 0.01, "loss_reduction": "sum"},
                      "adam": {"epsilon": 1e-8, "loss_reduction": "mean"}}
