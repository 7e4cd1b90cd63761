"""What the games are built from: the Atari protocol of a run, or its gymnasium env.

The envs read nothing else of a run. fast_dqn.run.components builds these settings from the
run's Config, in one place, so a new option reaches the games only through a field here.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvSettings:
    """The options the games are built from, one field each (the comments say its unit)."""

    game: str               # an ALE game name; ignored when `env` is set
    env: str | None         # a gymnasium env id (--env): only stats and history are added
    history_length: int     # frames stacked into one state
    noop_max: int           # a new game starts with U no-op emulator frames (not agent
                            # steps), U drawn from 0..noop_max-1 (FIRE, if pressed, is
                            # the first); atari_wrappers.GameStart
    fire_start: bool        # press FIRE at the start of a game (never after a lost life)
    action_repeat: int      # emulator frames per agent step, the last two max-pooled
    max_episode_steps: int  # a game is cut after this many agent steps
    episodic_life: bool     # a lost life ends the learner's episode
    sticky_actions: float   # ALE's repeat_action_probability
    full_action_space: bool  # all 18 actions, not the game's minimal set
    interp: str             # how frames are resized to 84x84 (OpenCV interpolation)
