"""Unpickling checkpoints written before the package moved into subpackages (2026-11-22).

A checkpoint pickles its state, and inside it each game's env, by class path: an env saved
as `fast_dqn.atari_wrappers.ClipReward` must load as `fast_dqn.envs.atari_wrappers.ClipReward`.
`loads` and `load` are pickle's, with the old module paths mapped to the new ones.
"""

import io
import pickle

MOVED_MODULES = {
    "fast_dqn.games": "fast_dqn.envs.games",
    "fast_dqn.ale_game": "fast_dqn.envs.ale_game",
    "fast_dqn.atari_wrappers": "fast_dqn.envs.atari_wrappers",
    "fast_dqn.environment": "fast_dqn.envs.environment",
    "fast_dqn.samplers": "fast_dqn.envs.samplers",
    "fast_dqn.q_network": "fast_dqn.agent.q_network",
    "fast_dqn.learner": "fast_dqn.agent.learner",
    "fast_dqn.replay_memory": "fast_dqn.agent.replay_memory",
    "fast_dqn.policy": "fast_dqn.agent.policy",
    "fast_dqn.schedules": "fast_dqn.agent.schedules",
    "fast_dqn.tf_setup": "fast_dqn.agent.tf_setup",
    "fast_dqn.nature_loop": "fast_dqn.loops.nature_loop",
    "fast_dqn.fast_loop": "fast_dqn.loops.fast_loop",
    "fast_dqn.background_trainer": "fast_dqn.loops.background_trainer",
    "fast_dqn.minibatch_schedule": "fast_dqn.loops.minibatch_schedule",
    "fast_dqn.experience": "fast_dqn.loops.experience",
    "fast_dqn.ray_backend": "fast_dqn.loops.ray_backend",
    "fast_dqn.evaluation": "fast_dqn.loops.evaluation",
    "fast_dqn.hyperparameters": "fast_dqn.run.hyperparameters",
    "fast_dqn.presets": "fast_dqn.run.presets",
    "fast_dqn.cli": "fast_dqn.run.cli",
    "fast_dqn.run_directory": "fast_dqn.run.run_directory",
    "fast_dqn.checkpoint": "fast_dqn.run.checkpoint",
    "fast_dqn.array_file": "fast_dqn.run.array_file",
    "fast_dqn.monitor": "fast_dqn.run.monitor",
    "fast_dqn.progress": "fast_dqn.run.progress",
    "fast_dqn.tensorboard_log": "fast_dqn.run.tensorboard_log",
    "fast_dqn.training": "fast_dqn.run.training",
    "fast_dqn.components": "fast_dqn.run.components",
    "fast_dqn.interrupts": "fast_dqn.run.interrupts",
    "fast_dqn.evaluate": "fast_dqn.tools.evaluate",
    "fast_dqn.plot": "fast_dqn.tools.plot",
    "fast_dqn.atari_scores": "fast_dqn.tools.atari_scores",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        return super().find_class(MOVED_MODULES.get(module, module), name)


def load(file):
    return _Unpickler(file).load()


def loads(data):
    return load(io.BytesIO(data))
