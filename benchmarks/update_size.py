"""How far one optimizer setting moves the Nature CNN, against its source's rule, per layer.

    python -m benchmarks.update_size [--game pong] [--steps 40]

Fills a replay memory with real frames (random play on the vector env), then trains copies of
one freshly initialised Nature CNN on the same sequence of minibatches, one copy per setting,
and prints, per weight tensor, how far each copy moved (the norm of its total weight change)
divided by how far the reference setting moved it:

- RMSProp against the Nature rule (summed loss, epsilon 0.01 inside the square root; that the
  summed setting is the Lua rule within 2% per layer is checked by tests/agent/test_learner.py);
- Adam with the epsilon pong-quick used to hard-code (1.5e-4) against Adam's own 1e-8.
"""

import argparse

import numpy as np

from fast_dqn.run.components import env_settings

RMSPROP = {"reference": ("rmsprop", 2.5e-4, 0.01, "sum"),
           "mean loss, eps 0.01 (before)": ("rmsprop", 2.5e-4, 0.01, "mean"),
           "mean loss, eps 1e-5 (Dopamine)": ("rmsprop", 2.5e-4, 1e-5, "mean")}
ADAM = {"reference": ("adam", 1e-4, 1e-8, "mean"),
        "eps 1.5e-4 (before)": ("adam", 1e-4, 1.5e-4, "mean")}


def real_minibatches(game, count, batch_size=32, seed=0):
    from fast_dqn.agent.replay_memory import ReplayMemory
    from fast_dqn.envs.samplers import VectorSamplers
    from fast_dqn.run.settings.hyperparameters import FastConfig
    samplers = VectorSamplers(env_settings(FastConfig(game=game)), 8, seed, num_threads=1)
    replay = ReplayMemory(20_000, (84, 84), 4, seed=seed, num_shards=8)
    rng = np.random.default_rng(seed)
    samplers.reset()
    for _ in range(1_000):
        result = samplers.step(rng.integers(0, samplers.num_actions, 8))
        for shard in range(8):
            replay.add(result.observations[shard, -1], 0, result.rewards[shard],
                       result.terminated[shard],
                       result.terminated[shard] or result.truncated[shard], shard=shard)
    samplers.close()
    actions = rng.integers(0, samplers.num_actions, (count, batch_size))
    batches = []
    for i in range(count):
        # The drawn transitions with actions of their own (the benchmark's fixed draws).
        batches.append(replay.sample(batch_size)._replace(actions=actions[i].astype(np.int32)))
    return batches, samplers.num_actions


def weight_changes(settings, batches, num_actions, seed=0):
    import keras

    from fast_dqn.agent.learner import DQNLearner, make_optimizer
    from fast_dqn.agent.q_network import nature_cnn
    keras.utils.set_random_seed(seed)
    initial = nature_cnn((4, 84, 84), num_actions).get_weights()
    changes = {}
    for name, (optimizer, lr, epsilon, reduction) in settings.items():
        learner = DQNLearner(lambda: nature_cnn((4, 84, 84), num_actions),
                             make_optimizer(optimizer, lr, epsilon), loss_reduction=reduction)
        state = learner.state_dict()
        learner.load_state_dict({**state, "main": initial, "target": initial})
        for batch in batches:
            learner.train(batch)
        changes[name] = [np.linalg.norm(after - before)
                         for after, before in zip(learner.main.get_weights(), initial)]
    return changes


def print_ratios(title, changes, layer_names):
    reference = changes.pop("reference")
    print(f"\n{title}: weight change / reference's, per tensor")
    print("| setting | " + " | ".join(layer_names) + " |")
    print("|---" * (len(layer_names) + 1) + "|")
    for name, norms in changes.items():
        print(f"| {name} | " + " | ".join(f"{n / r:.3f}" for n, r in zip(norms, reference))
              + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="pong")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    batches, num_actions = real_minibatches(args.game, args.steps)
    names = [f"{kind}{layer}" for layer in ("conv1", "conv2", "conv3", "fc", "out")
             for kind in ("W ", "b ")]
    print(f"{args.game}, {args.steps} minibatches of 32 real frames, Nature CNN")
    print_ratios("RMSProp (Nature: lr 2.5e-4, rho 0.95, centered)",
                 weight_changes(RMSPROP, batches, num_actions), names)
    print_ratios("Adam (lr 1e-4)", weight_changes(ADAM, batches, num_actions), names)


if __name__ == "__main__":
    main()
