"""Named protocols: sets of Config values that replace the defaults as a whole.

Precedence, lowest first: Config's defaults (Nature), then the chosen preset, then each flag
the user typed. config.json records the final values, so a run never depends on this table.
Where each preset's values come from: docs/protocol.md#sources-of-the-constants-and-defaults
"""

# Small replay, short exploration, Adam and frequent target updates: Lapan's Pong values. Adam's
# epsilon and mean loss are OPTIMIZER_DEFAULTS' adam entry. Training every step is the
# expensive part on a CPU. Which value is his, from which file and line, and which is ours:
# docs/protocol.md#pong-quick-and-pong-fastest-against-lapans-code
PONG_QUICK = {
    "game": "pong",
    "timesteps": 1_000_000,
    "replay_capacity": 100_000,
    "prepopulate": 10_000,
    "eps_end": 0.01,
    "eps_decay_steps": 100_000,
    "optimizer": "adam",
    "lr": 1e-4,
    "train_freq": 1,
    "target_update_freq": 1_000,
    "evaluate": 50_000,
    "eval_episodes": 10,
    "checkpoint_freq": 50_000,
}

# Dopamine's DQN constant for constant, in agent steps, so a run compares with its published
# curves. Each value's file: docs/protocol.md#nature-machado-and-dopamine
DOPAMINE = {
    # the environment: Machado et al.'s protocol with the minimal action set
    "sticky_actions": 0.25,
    "full_action_space": False,
    "episodic_life": False,
    "noop_max": 0,
    "fire_start": False,
    "max_episode_steps": 27_000,
    # the agent
    "replay_capacity": 1_000_000,
    "prepopulate": 20_000,
    "batch_size": 32,
    "train_freq": 4,
    "target_update_freq": 8_000,
    "discount": 0.99,
    "n_step": 1,
    "eps_start": 1.0,
    "eps_end": 0.01,
    "eps_decay_steps": 250_000,
    "eps_decay_start": 20_000,
    "eval_epsilon": 0.001,
    "optimizer": "rmsprop",
    "lr": 0.00025,
    "optimizer_epsilon": 0.00001,
    "rmsprop_init": 1.0,
    "loss_reduction": "mean",
    "network": "dopamine",
    "precision": "float32",
    # the schedule: 200 iterations of 250k steps; the published values are the training
    # games' returns, so no separate evaluation phase by default
    "timesteps": 50_000_000,
    "evaluate": 0,
    "checkpoint_freq": 250_000,
}

PRESETS = {
    # Mnih et al. 2015: the Config defaults themselves.
    "nature": {},
    # Machado et al. 2018, "Revisiting the ALE": sticky actions instead of no-op starts, all 18
    # actions, no life-loss signal, and the score reported is the mean of the last 100 training
    # games (episodes.csv's mean_100) rather than a separate evaluation phase.
    "machado": {
        "sticky_actions": 0.25,
        "full_action_space": True,
        "episodic_life": False,
        "noop_max": 0,
        "evaluate": 0,
    },
    # Dopamine's DQN (Castro et al. 2018), whose published training curves
    # (plot --reference dopamine) a run can be drawn against;
    # tests/run/settings/test_dopamine_preset.py pins it.
    "dopamine": DOPAMINE,
    "pong-quick": PONG_QUICK,
    # pong-quick's protocol with the extensions that cut agent steps (Double DQN, the dueling
    # head, 3-step returns), and a learner that costs less per sample, so that one command
    # solves Pong soonest on 2 CPU cores. One minibatch of 128 per 4 agent steps keeps
    # pong-quick's 32 samples per agent step at a higher samples/s on a CPU; bfloat16 only
    # where the hardware computes it. Sources:
    # docs/protocol.md#pong-quick-and-pong-fastest-against-lapans-code; the runs that chose
    # it: docs/learning.md#why-the-presets-hold-these-values
    "pong-fastest": {
        **PONG_QUICK,
        "double": True,
        "dueling": True,
        "n_step": 3,
        "train_freq": 4,
        "batch_size": 128,
        "precision": "auto",
    },
    # Classic-control envs given with --env (CartPole-v1 and the like): raw vector observations,
    # an MLP, and a budget of minutes. Chosen when --env is given and --preset is not.
    "classic": {
        "history_length": 1,
        "timesteps": 50_000,
        "replay_capacity": 50_000,
        "prepopulate": 1_000,
        "batch_size": 64,
        "train_freq": 1,
        "target_update_freq": 200,
        "optimizer": "adam",
        "lr": 3e-4,
        # Chosen by measurement, not from a source (docs/learning.md).
        "optimizer_epsilon": 1.5e-4,
        "eps_end": 0.05,
        "eps_decay_steps": 10_000,
        "evaluate": 5_000,
        "eval_episodes": 10,
        "eval_epsilon": 0.0,
        "checkpoint_freq": 25_000,
    },
}


# Protocols of Atari games: --env with one of them is refused.
ATARI_PRESETS = ("machado", "dopamine", "pong-quick", "pong-fastest")


def preset_values(name):
    """The Config values preset `name` sets, as a dict of its own the caller may change."""
    return dict(PRESETS[name])
