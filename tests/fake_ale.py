"""A scripted stand-in for fast_dqn.envs.ale_game.AleGame: screens, lives, FIRE, rewards. No ROM.

Every emulator frame f (counted from 1 since the last reset) shows a screen whose pixels all
equal `screen_value(f)`, except a flickering sprite drawn only on odd frames, so max-pooling
is visible. Screens are 2-D grayscale, as the ALE's. Lives drop at the frames listed in
`life_loss_frames`; the game ends when lives reach zero or at `game_over_frame`.
"""

import gymnasium
import numpy as np

SPRITE = (slice(10, 20), slice(10, 20))


class FakeAtariEnv(gymnasium.Env):
    def __init__(self, action_meanings=("NOOP", "FIRE", "UP", "DOWN"), lives=3,
                 life_loss_frames=(), game_over_frame=None, reward_fn=None, height=210,
                 width=160):
        self.action_meanings = list(action_meanings)
        self.action_space = gymnasium.spaces.Discrete(len(self.action_meanings))
        self.observation_space = gymnasium.spaces.Box(0, 255, (height, width), np.uint8)
        self.start_lives = lives
        self.life_loss_frames = set(life_loss_frames)
        self.game_over_frame = game_over_frame
        self.reward_fn = reward_fn or (lambda frame, action: 0.0)
        self.shape = (height, width)
        self.actions = []      # every action ever stepped, across resets
        self.num_resets = 0
        self.frame = 0
        self.lives = lives

    def get_action_meanings(self):
        return self.action_meanings

    @staticmethod
    def screen_value(frame):
        return (frame * 7) % 200

    def screen(self):
        obs = np.full(self.shape, self.screen_value(self.frame), dtype=np.uint8)
        if self.frame % 2 == 1:
            obs[SPRITE] = 250
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.num_resets += 1
        self.frame = 0
        self.lives = self.start_lives
        return self.screen(), {"lives": self.lives}

    def step(self, action):
        self.actions.append(int(action))
        self.frame += 1
        reward = float(self.reward_fn(self.frame, int(action)))
        if self.frame in self.life_loss_frames:
            self.lives -= 1
        terminated = self.lives <= 0 or self.frame == self.game_over_frame
        return self.screen(), reward, terminated, False, {"lives": self.lives}
