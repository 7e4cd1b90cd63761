"""Run logs: episodes.csv, eval.csv and a console line at least every `interval` seconds.

episodes.csv has one row per full game (all lives), with the unclipped score:
    episode, agent_step, length, return, mean_100, epsilon, hours
eval.csv has one row per evaluation:
    agent_step, mean, std, episodes
Rows are flushed as written, so `tail -f` works and a crash loses nothing already logged.
"""

import collections
import csv
import os
import sys
import time

import numpy as np

EPISODE_COLUMNS = ("episode", "agent_step", "length", "return", "mean_100", "epsilon", "hours")
EVAL_COLUMNS = ("agent_step", "mean", "std", "episodes")


class CsvLog:
    def __init__(self, path, columns):
        new = not os.path.exists(path)
        self.file = open(path, "a", newline="")
        self.writer = csv.writer(self.file)
        if new:
            self.writer.writerow(columns)
            self.file.flush()

    def write(self, row):
        self.writer.writerow(row)
        self.file.flush()

    def close(self):
        self.file.close()


def _format_duration(seconds):
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    return f"{days}d{hours:02d}h" if days else f"{hours}h{minutes:02d}m"


class Monitor:
    def __init__(self, run_dir, total_steps, interval=10.0, clock=time.monotonic, out=None):
        self.total_steps = total_steps
        self.interval = interval
        self.clock = clock
        self.out = out or sys.stdout
        self.episodes = CsvLog(os.path.join(run_dir, "episodes.csv"), EPISODE_COLUMNS)
        self.evals = CsvLog(os.path.join(run_dir, "eval.csv"), EVAL_COLUMNS)
        self.recent_returns = collections.deque(maxlen=100)
        self.num_games = 0
        self.start = clock()
        self.last_print = self.start
        self.last_print_step = 0
        self.last_loss = None

    @property
    def mean_100(self):
        return float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")

    def record_game(self, step, length, game_return, epsilon):
        self.recent_returns.append(game_return)
        self.num_games += 1
        hours = (self.clock() - self.start) / 3600
        self.episodes.write([self.num_games, step, length, game_return, round(self.mean_100, 3),
                             round(epsilon, 5), round(hours, 5)])

    def record_train(self, loss):
        self.last_loss = loss

    def record_eval(self, step, returns):
        mean, std = float(np.mean(returns)), float(np.std(returns))
        self.evals.write([step, round(mean, 3), round(std, 3), len(returns)])
        self._print(f"eval at step {step:,}: mean {mean:.2f} +- {std:.2f} over "
                    f"{len(returns)} games")

    def tick(self, step, epsilon):
        """Print a progress line if `interval` seconds have passed since the last one."""
        now = self.clock()
        if now - self.last_print < self.interval:
            return
        rate = (step - self.last_print_step) / (now - self.last_print)
        eta = (self.total_steps - step) / rate if rate > 0 else float("inf")
        loss = "-" if self.last_loss is None else f"{self.last_loss:.4f}"
        self._print(f"step {step:,}/{self.total_steps:,} ({100 * step / self.total_steps:.1f}%)"
                    f" | {rate:,.0f} steps/s | eps {epsilon:.3f} | games {self.num_games}"
                    f" | mean100 {self.mean_100:.2f} | loss {loss}"
                    f" | ETA {_format_duration(eta) if rate > 0 else '?'}")
        self.last_print, self.last_print_step = now, step

    def _print(self, line):
        print(line, file=self.out, flush=True)

    def close(self):
        self.episodes.close()
        self.evals.close()
