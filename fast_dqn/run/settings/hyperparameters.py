"""Every hyperparameter in one annotated place, with its unit.

Units: an *agent step* is one action chosen by the agent; with action repeat 4 it spans
4 emulator *frames*. All step counts here are agent steps unless the name says frames.

The defaults are the Nature DQN protocol, counted in agent steps as DeepMind's released code
counts them where the paper is ambiguous. Sources:
docs/protocol.md#sources-of-the-constants-and-defaults
"""

import dataclasses
from dataclasses import dataclass, field


class _Topic:
    """A topic of --help, whose calls declare the settings under it.

    A call declares one setting: its default, help and unit, its limit (checked by
    fast_dqn.run.settings.validation: "positive", "non_negative" or "probability"), and
    argparse's own arguments (choices). Everything about an option is in its one declaration.
    """

    def __init__(self, title):
        self.title = title
        TOPICS.append(title)

    def __call__(self, default, help, unit=None, limit=None, **argparse_kwargs):
        meta = {"help": help, "unit": unit, "topic": self.title, "limit": limit,
                "argparse": argparse_kwargs}
        return field(default=default, metadata=meta)


# The fast loop's minibatches per compiled call that --updates-per-call 0 (the default) means,
# where an accelerator trains and where the CPU does: chosen by measurement on a CPU
# (docs/benchmarks.md) and by the fixed cost measured on GPUs (docs/gpu.md).
UPDATES_PER_CALL = {"accelerator": 64, "cpu": 16}

TOPICS = []  # --help shows the flags by topic, in this order
_protocol = _Topic("protocol: the game and its preprocessing")
_budget = _Topic("budget and evaluation")
_training = _Topic("training")
_extension = _Topic("DQN extensions (all off: the Nature DQN)")
_fast_loop = _Topic("fast loop")
_ray = _Topic("Ray (--backend ray)")
_run = _Topic("run: directory, checkpoints, resources")


@dataclass
class Config:
    """The Nature loop's settings, each declared with its default, help text, unit and limit.

    Each field's metadata (see dataclasses.fields) holds what --help and validation read.
    """

    # --- what to play
    preset: str = _protocol("nature", "protocol whose values replace the defaults below; explicit "
                            "flags still win (see docs/protocol.md)",
                            choices=("nature", "machado", "dopamine", "pong-quick", "pong-fastest",
                                     "classic"))
    game: str = _protocol("pong", "Atari game, snake_case (space_invaders) or CamelCase "
                          "(SpaceInvaders)")
    env: str = _protocol(None, "any gymnasium env id with discrete actions and vector observations "
                         "(e.g. CartPole-v1) instead of --game: an MLP Q-network, no Atari "
                         "preprocessing, and the 'classic' preset unless --preset is given")
    episodic_life: bool = _protocol(True, "a lost life ends the learner's episode (the game goes "
                                    "on); Machado et al. 2018 turn this off")
    sticky_actions: float = _protocol(0.0, "probability the emulator repeats the previous action "
                                      "(0.0 for Nature, 0.25 for Machado et al. 2018)",
                                      limit="probability")
    full_action_space: bool = _protocol(False, "use all 18 actions instead of the game's "
                                        "minimal set")
    interp: str = _protocol("area", "opencv interpolation for the 84x84 resize; the vector backend "
                            "does area only", choices=("area", "linear", "nearest", "cubic"))
    max_episode_steps: int = _protocol(27_000, "time limit per game (27k agent steps = 108k "
                                       "frames)", "agent steps", limit="positive")
    noop_max: int = _protocol(30, "each game starts with FIRE (see --fire-start) then no-ops, "
                              "0..noop_max-1 frames in all, drawn as ale-py's vector env draws "
                              "them", "frames", limit="non_negative")
    fire_start: bool = _protocol(True, "press FIRE to start each game in games that have it, as "
                                 "ale-py's vector env does; Dopamine does not, so its agent "
                                 "learns to serve")
    action_repeat: int = _protocol(4, "frames per agent step; the last two are max-pooled",
                                   "frames", limit="positive")
    history_length: int = _protocol(4, "frames stacked into one state", "frames", limit="positive")

    # --- budget and evaluation
    timesteps: int = _budget(50_000_000, "training budget (50M agent steps = 200M frames)",
                             "agent steps", limit="positive")
    evaluate: int = _budget(250_000, "evaluate every this many steps; 0 turns evaluation off",
                            "agent steps", limit="non_negative")
    eval_episodes: int = _budget(30, "full games per evaluation", "games", limit="positive")
    eval_epsilon: float = _budget(0.05, "epsilon of the evaluation policy", limit="probability")
    eval_max_episode_steps: int = _budget(0, "time limit per evaluation game (Atari); 0: the "
                                          "training's --max-episode-steps. 4500 (18k frames) "
                                          "is the 2015 paper's 5-minute cap", "agent steps",
                                          limit="non_negative")
    eval_workers: int = _budget(8, "evaluation games played at once on ale-py's vector env "
                                "(Atari); 1 plays them one after another in Python. The same "
                                "games either way: each is seeded by the run's seed, the "
                                "evaluation's step and its number", "games", limit="positive")

    # --- replay
    replay_capacity: int = _training(1_000_000, "replay memory size", "agent steps",
                                     limit="positive")
    prepopulate: int = _training(50_000, "uniform-random warm-up steps before training starts",
                                 "agent steps", limit="non_negative")

    # --- learning
    batch_size: int = _training(32, "minibatch size", "transitions", limit="positive")
    train_freq: int = _training(4, "train one minibatch every this many agent steps",
                                "agent steps", limit="positive")
    target_update_freq: int = _training(10_000, "copy main -> target network every this many steps",
                                        "agent steps", limit="positive")
    discount: float = _training(0.99, "discount factor gamma", limit="probability")
    optimizer: str = _training("rmsprop", "rmsprop = centered RMSProp (rho 0.95) as in Nature; "
                               "adam = Adam", choices=("rmsprop", "adam"))
    optimizer_epsilon: float = _training(None, "the optimizer's epsilon; unset = its source's "
                                         "value: 0.01 (inside the square root) for rmsprop as "
                                         "in Nature, 1e-8 for adam (PyTorch's default, kept "
                                         "by Lapan's Pong DQN, CleanRL and SB3)")
    rmsprop_init: float = _training(0.0, "rmsprop: the running mean square's starting value; 0 "
                                    "as the Nature code and Keras, 1 as TensorFlow 1's "
                                    "RMSPropOptimizer, which Dopamine uses",
                                    limit="non_negative")
    loss_reduction: str = _training(None, "how the minibatch's Huber losses combine; unset = "
                                    "sum for rmsprop (the Nature code sums), mean for adam",
                                    choices=("sum", "mean"))
    lr: float = _training(2.5e-4, "learning rate")
    eps_start: float = _training(1.0, "initial exploration epsilon", limit="probability")
    eps_end: float = _training(0.1, "final exploration epsilon", limit="probability")
    eps_decay_steps: int = _training(1_000_000, "epsilon decays linearly over this many steps, "
                                     "counted from --eps-decay-start", "agent steps",
                                     limit="positive")
    eps_decay_start: int = _training(0, "agent step where the epsilon decay begins; before it "
                                     "epsilon is --eps-start. 0 as in Nature; Dopamine starts "
                                     "it at its warm-up's end", "agent steps",
                                     limit="non_negative")

    network: str = _training("nature", "the Atari CNN's details: nature = 'valid' padding and "
                             "Torch's uniform(+-1/sqrt(fan_in)) weights, as the Nature code; "
                             "dopamine = 'same' padding and Glorot-uniform weights, as "
                             "Dopamine's network", choices=("nature", "dopamine"))

    # --- DQN extensions (all off: the Nature DQN)
    double: bool = _extension(False, "Double DQN (van Hasselt et al. 2016): the main network picks "
                              "the next action, the target network values it")
    dueling: bool = _extension(False, "dueling head (Wang et al. 2016): value and mean-centred "
                               "advantage streams")
    n_step: int = _extension(1, "n-step returns: sum this many discounted rewards, then bootstrap; "
                             "the sum stops at a terminal and before a time-limit cut",
                             limit="positive")

    # --- checkpoints
    checkpoint_freq: int = _run(250_000, "save a checkpoint every this many steps (and on "
                                "Ctrl-C/SIGTERM and at the end); 0 = only those", "agent steps",
                                limit="non_negative")
    save_replay: bool = _run(False, "include the replay memory in checkpoints (zstd-compressed), "
                             "so a resumed run continues exactly")

    # --- bookkeeping
    seed: int = _run(0, "seeds numpy, the Keras backend, every env and action sampling; "
                     "below 2^31",
                     limit="non_negative")
    logdir: str = _run(None, "run directory, new or empty; unset = "
                       "runs/<game>-<loop>-<timestamp>, or with a --preset other than "
                       "nature and classic runs/<game>-<preset>-<timestamp> "
                       "(runs/pong-fastest-<timestamp>)")
    xla: bool = _run(False, "compile the train step with XLA (TensorFlow's jit_compile; under "
                     "JAX it always is)")
    threads: int = _run(0, "TensorFlow intra-op threads; 0 lets TensorFlow choose (JAX "
                        "sizes its own)", "threads",
                        limit="non_negative")
    mixed_precision: bool = _run(False, "the same as --precision float16 (kept for runs "
                                 "that used it)")
    precision: str = _run("float32", "the networks' compute type; weights, Q-values and the "
                          "loss stay float32. bfloat16: CPUs with AMX or AVX512-BF16, and "
                          "GPUs from Ampere on; float16 (with loss scaling): GPUs with tensor "
                          "cores (slow on most CPUs); auto: bfloat16 where it runs natively, "
                          "else float32", choices=("float32", "bfloat16", "float16", "auto"))
    matmul_precision: str = _run("default", "float32 matrix products and convolutions: default "
                                 "= the backend's own (TensorFloat-32 on NVIDIA GPUs from "
                                 "Ampere on, under TensorFlow and JAX alike; float32 "
                                 "elsewhere); float32 = float32 everywhere; tf32 = "
                                 "TensorFloat-32 where the GPU has it (10-bit products, "
                                 "float32 sums): a precision choice, as --precision is",
                                 choices=("default", "float32", "tf32"))
    deterministic: bool = _run(True, "deterministic GPU kernels, so a seed repeats its run "
                               "on one machine; off, a GPU may sum in any order (faster "
                               "train calls), and seeded runs no longer repeat")
    scan_unroll: int = _run(0, "JAX: updates per iteration of the compiled loop over a call's "
                            "minibatches; 0 = all of them on a CPU (XLA:CPU loops run "
                            "convolutions slowly), 1 on a GPU; the same math whatever the "
                            "value", "updates", limit="non_negative")
    fused_optimizer: bool = _run(False, "JAX: one optimizer step over all weights as one "
                                 "vector, not weight by weight: fewer GPU kernels, the same "
                                 "math within float32 rounding")

    LOOP = "dqn"  # the loop config.json's "loop" names (fast_dqn.run.run_kinds)

    def to_dict(self):
        """The settings as a dict.

        Returns:
            {setting: value}, every field of the dataclass.
        """
        return dataclasses.asdict(self)


# Settings that may differ from the saved config when resuming: they change speed, budget or
# bookkeeping, never what the agent has learned so far or how it learns. A checkpoint records
# every other setting, and a resume checks config.json against that record.
RESUME_OVERRIDES = ("timesteps", "threads", "env_threads", "checkpoint_freq", "save_replay",
                    "xla", "prefetch", "requests_in_flight", "ray_address",
                    "ray_object_store_mb", "eval_workers", "updates_per_call", "replay_device",
                    "deterministic", "scan_unroll", "fused_optimizer", "act_on_cpu")

# Settings whose default changed after they were added: a config.json written before it has
# them recorded, but one written before the setting existed ran with the value here (one
# sampler group: 0, picking two on a GPU, came later).
EARLIER_DEFAULTS = {"sampler_groups": 1}

# The Atari protocol's settings: a gymnasium --env run does not use them, and its config.json
# records them as null (a resume reads that as the default it ran with).
ATARI_ONLY = ("episodic_life", "sticky_actions", "full_action_space", "interp",
              "max_episode_steps", "noop_max", "fire_start", "action_repeat",
              "eval_max_episode_steps", "network")


def recorded(config):
    """The settings as config.json records them: the Atari settings null in an --env run."""
    values = config.to_dict()
    if config.env is not None:
        values.update(dict.fromkeys(ATARI_ONLY))
    return values


# The overrides that belong to the run rather than the machine it runs on: each checkpoint
# records those a resume changed, and a plain --resume keeps the last ones given, so that a run extended with
# --timesteps and then stopped goes on to that budget (config.json keeps the first values).
RUN_PLAN = ("timesteps", "checkpoint_freq", "save_replay")


def evaluation_cap(config):
    """The agent steps an evaluation game may last: its own limit, or training's."""
    return config.eval_max_episode_steps or config.max_episode_steps


def learning_settings(config):
    """The settings a checkpoint's training depends on: all but RESUME_OVERRIDES and logdir.

    Args:
        config: the run's settings (a Config or FastConfig, resolved or not).

    Returns:
        {setting: value} of the settings a resume may not change.
    """
    return {name: value for name, value in config.to_dict().items()
            if name not in RESUME_OVERRIDES and name != "logdir"}




@dataclass
class FastConfig(Config):
    """The fast loop's extra settings (Daley & Amato 2021). Everything else is as in Config."""

    LOOP = "fast"

    workers: int = _fast_loop(8, "samplers, each playing its own game", "samplers",
                              limit="positive")
    concurrent: bool = _fast_loop(True, "train in a background thread while the samplers act; "
                                  "off = lockstep, one minibatch per train_freq agent steps")
    synchronize: bool = _fast_loop(True, "send all samplers' states through the target network in "
                                   "one batched call per round; off = one call per sampler")
    env_backend: str = _fast_loop("vector", "vector = ale-py's AtariVectorEnv (C++ threads, "
                                  "parallel); python = fast_dqn.envs.atari_wrappers, stepped in "
                                  "turn; both give the same frames",
                                  choices=("vector", "python"))
    env_threads: int = _fast_loop(0, "C++ threads of the vector backend; 0 = one per core, at most "
                                  "--workers", "threads", limit="non_negative")
    sampler_groups: int = _fast_loop(0, "1 = all W games act in one call per round; 2 = two "
                                     "groups that take turns, one stepping in C++ while the "
                                     "main thread acts for the other (needs --env-backend "
                                     "vector, --synchronize and an even --workers); 0 = 2 on "
                                     "a GPU where the games can, else 1", "groups",
                                     limit="non_negative")
    prefetch: bool = _fast_loop(True, "draw the next call's minibatches in a second thread while "
                                "the current call trains")
    updates_per_call: int = _fast_loop(0, "minibatches the trainer trains in one compiled call "
                                       "(K); the same minibatches in the same order whatever "
                                       f"K; 0 = {UPDATES_PER_CALL['accelerator']} on a GPU, "
                                       f"{UPDATES_PER_CALL['cpu']} on a CPU", "minibatches",
                                       limit="non_negative")
    replay_device: str = _fast_loop("auto", "where the trainer gathers its minibatches: device = "
                                    "replay mirrored in the GPU's memory, written at each sync "
                                    "point; host = gathered in RAM, K minibatches copied per "
                                    "call; auto = device on a GPU with room for it, else host",
                                    choices=("auto", "device", "host"))
    act_on_cpu: bool = _fast_loop(False, "JAX: the samplers' acting calls run on the CPU, "
                                  "through a copy of the target network made at each sync "
                                  "point, so that they never wait behind a train call on the "
                                  "GPU (which runs one process's calls one after another)")

    # --- where the samplers run (see docs/ray.md)
    backend: str = _ray("threads", "threads = the --workers samplers in this process; ray = "
                        "sampler actors on a Ray cluster, each acting with its own copy of the "
                        "target network", choices=("threads", "ray"))
    num_samplers: int = _ray(2, "--backend ray: sampler actors (one CPU each)", "actors",
                             limit="positive")
    envs_per_sampler: int = _ray(4, "--backend ray: games each actor plays (instead of "
                                 "--workers)", "games", limit="positive")
    rollout_steps: int = _ray(64, "--backend ray: steps of each game per request; a request "
                              "returns envs-per-sampler × this many frames", "agent steps",
                              limit="positive")
    requests_in_flight: int = _ray(2, "--backend ray: requests outstanding per actor, so it "
                                   "plays on while its last batch travels", "requests",
                                   limit="positive")
    ray_address: str = _ray(None, "--backend ray: omitted = start a private cluster on this "
                            "machine; 'auto' or HOST:PORT = join a running one (ray start)")
    ray_object_store_mb: int = _ray(1024, "--backend ray: object store size of the private "
                                    "cluster", "MiB", limit="positive")
