"""One Atari emulator as a gymnasium env, driven the way ale-py's AtariVectorEnv drives its games.

It is the emulator layer of the project's one preprocessing (docs/protocol.md, "The
protocol"); the wrappers of fast_dqn.envs.atari_wrappers are the rest:

- one emulator frame per step; the observation is the ALE's own grayscale screen (its
  palette's luminance, `getScreenGrayscale`), 210x160 uint8, as the vector env takes it;
- `reset(seed=s)` seeds the game as the vector env seeds a game given seed s: the emulator's
  `random_seed` (which drives sticky actions) is s and the ROM is reloaded; a reset without a
  seed starts a new game and keeps every random stream going. So two resets with one seed play
  the same game (gymnasium's env checker asks exactly that);
- sticky actions are the ALE's own (`repeat_action_probability`);
- `render()` gives the RGB screen, for videos.

We use ALEInterface directly rather than gymnasium's AtariEnv because AtariEnv derives the
emulator's seed from a SeedSequence, and the screens and sticky actions must follow the same
seed as the vector env's.
"""

import gymnasium
import numpy as np

from fast_dqn.state_schema import ARRAY, BYTES, RNG, TEXT, StateMismatch, check_state

SCREEN_SHAPE = (210, 160)


def new_emulator():
    """A new ALE emulator, with no game loaded and its logging down to errors."""
    import ale_py
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on stdout
    return ale_py.ALEInterface()


class AleGame(gymnasium.Env):
    """One Atari game's emulator as a gymnasium env (arguments: see make_raw_atari_env)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60}

    def __init__(self, game, sticky_actions=0.0, full_action_space=False):
        from ale_py import roms
        self.game = game
        self.sticky_actions = float(sticky_actions)
        self.full_action_space = bool(full_action_space)
        self.rom_path = roms.get_rom_path(game)
        self.render_mode = "rgb_array"
        self.ale = new_emulator()
        self._load(seed=None)
        self.game_start, self.actions_since_start = None, []
        self.action_space = gymnasium.spaces.Discrete(len(self.action_set))
        self.observation_space = gymnasium.spaces.Box(0, 255, SCREEN_SHAPE, np.uint8)

    def _load(self, seed):
        if seed is not None:
            self.ale.setInt("random_seed", int(seed))
        self.ale.setFloat("repeat_action_probability", self.sticky_actions)
        self.ale.loadROM(str(self.rom_path))
        self.action_set = (self.ale.getLegalActionSet() if self.full_action_space
                           else self.ale.getMinimalActionSet())

    def get_action_meanings(self):
        return [action.name for action in self.action_set]

    def _info(self):
        return {"lives": self.ale.lives(), "episode_frame_number": self.ale.getEpisodeFrameNumber()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._load(seed)
        self.ale.reset_game()
        self.game_start = self.ale.cloneState(include_rng=True)
        self.actions_since_start = []
        return self.ale.getScreenGrayscale(), self._info()

    def step(self, action):
        if self.sticky_actions:  # only a sticky game is saved as its actions (see below)
            self.actions_since_start.append(int(action))
        reward = float(self.ale.act(self.action_set[int(action)]))
        return (self.ale.getScreenGrayscale(), reward, self.ale.game_over(), False,
                self._info())

    def render(self):
        return self.ale.getScreenRGB()

    def close(self):
        pass  # the emulator is freed with the object

    # A checkpoint keeps the game mid-play, the emulator's RNG included, as the ALE's own
    # serialized state. That state lacks the action the emulator applied last, which a sticky
    # action repeats; so with sticky actions the game is kept as its start and the actions
    # since, and replayed.
    def state_dict(self):
        state = {"game": self.game, "np_random": self.np_random.bit_generator.state}
        if self.sticky_actions and self.game_start is not None:
            state["game_start"] = self.game_start.serialize()
            state["actions"] = np.array(self.actions_since_start, np.uint8)
        else:
            state["emulator"] = self.ale.cloneState(include_rng=True).serialize()
        return state

    STATE = {"game": TEXT, "np_random": RNG}

    def check_saved(self, state, path):
        # The emulator is saved one of two ways (state_dict); ALE itself reads the bytes.
        if state["game"] != self.game:
            raise StateMismatch(f"{path}/game is {state['game']!r}, not {self.game!r}")
        if "game_start" not in state:
            check_state(state, {"emulator": BYTES}, path)
            return
        check_state(state, {"game_start": BYTES, "actions": ARRAY}, path)
        actions = state["actions"]
        if actions.ndim != 1 or actions.dtype.kind not in "iu" or \
                (len(actions) and actions.max() >= len(self.action_set)):
            raise StateMismatch(f"{path}/actions is not a list of this game's "
                                f"{len(self.action_set)} actions")

    def load_state_dict(self, state):
        from ale_py import ALEState
        if state["game"] != self.game:
            raise ValueError(f"the saved emulator plays {state['game']}, this one {self.game}")
        if "game_start" in state:
            self.game_start = ALEState(state["game_start"])
            self.ale.restoreState(self.game_start)
            self.actions_since_start = []
            for action in state["actions"]:
                self.step(action)
        else:
            self.ale.restoreState(ALEState(state["emulator"]))
        self.np_random.bit_generator.state = state["np_random"]
