"""Run logs: episodes.csv, eval.csv, TensorBoard scalars and the console.

episodes.csv has one row per full game (all lives), with the unclipped score:
    episode, agent_step, length, return, mean_100, epsilon, hours
eval.csv has one row per evaluation:
    agent_step, mean, std, episodes, hours
hours are wall-clock hours of training, summed over the sessions of a resumed run.
Rows are flushed as written, so `tail -f` works and a crash loses nothing already logged.
"""

import collections
import csv
import os
import threading
import time

import numpy as np

EPISODE_COLUMNS = ("episode", "agent_step", "length", "return", "mean_100", "epsilon", "hours")
EVAL_COLUMNS = ("agent_step", "mean", "std", "episodes", "hours")


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


class Monitor:
    """The run's logs: CSVs, optional TensorBoard scalars and the console.

    Called from the loop's main thread, except record_train, which the fast loop's trainer
    thread calls; it only accumulates, under a lock, and the main thread reads at tick().
    """

    def __init__(self, run_dir, total_steps, interval=10.0, clock=time.monotonic, console=None,
                 scalars=None, resume=None, replay_fill=None):
        """replay_fill(): the replay's fill in [0, 1], read only when the scalars are due."""
        from fast_dqn.run.progress import ProgressLines
        self.total_steps = total_steps
        self.interval = interval
        self.clock = clock
        self.scalars = scalars
        self.replay_fill = replay_fill
        self.recent_returns = collections.deque(maxlen=100)
        self.num_games = 0
        self.elapsed_before = 0.0  # seconds of earlier sessions of a resumed run
        resume = resume or {}
        if resume:
            # Rows written after the checkpoint belong to steps the resumed run does again.
            for name, position in resume["positions"].items():
                with open(os.path.join(run_dir, name), "r+b") as f:
                    f.truncate(position)
            self.recent_returns.extend(resume["recent_returns"])
            self.num_games = resume["num_games"]
            self.elapsed_before = resume["elapsed"]
        self.episodes = CsvLog(os.path.join(run_dir, "episodes.csv"), EPISODE_COLUMNS)
        self.evals = CsvLog(os.path.join(run_dir, "eval.csv"), EVAL_COLUMNS)
        self.console = console or ProgressLines(total_steps, interval=interval)
        self.start = clock()
        self.last_console = self.last_scalars = self.start
        self.last_console_step = self.last_scalars_step = resume.get("step", 0)
        self._lock = threading.Lock()
        self._loss_sum = self._q_sum = 0.0
        self._num_losses = 0
        self.last_loss = None

    @property
    def mean_100(self):
        return float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")

    @property
    def hours(self):
        return (self.elapsed_before + self.clock() - self.start) / 3600

    def record_game(self, step, length, game_return, epsilon):
        self.recent_returns.append(game_return)
        self.num_games += 1
        self.episodes.write([self.num_games, step, length, game_return, round(self.mean_100, 3),
                             round(epsilon, 5), round(self.hours, 5)])
        if self.scalars:
            self.scalars.scalars(step, {"train/episode_return": game_return,
                                        "train/mean_100": self.mean_100})

    def record_train(self, loss, mean_q=None):
        with self._lock:
            self._loss_sum += loss
            self._q_sum += mean_q if mean_q is not None else 0.0
            self._num_losses += 1
            self.last_loss = loss

    def record_eval(self, step, returns):
        mean, std = float(np.mean(returns)), float(np.std(returns))
        self.evals.write([step, round(mean, 3), round(std, 3), len(returns),
                          round(self.hours, 5)])
        if self.scalars:
            self.scalars.scalars(step, {"eval/mean": mean, "eval/std": std})
            self.scalars.flush()
        self.console.message(f"eval at step {step:,}: mean {mean:.2f} +- {std:.2f} over "
                             f"{len(returns)} games")

    def message(self, line):
        self.console.message(line)

    def tick(self, step, epsilon):
        """Called every step: updates the console and the scalars when they are due."""
        now = self.clock()
        if now - self.last_console >= self.console.interval:
            rate = (step - self.last_console_step) / max(now - self.last_console, 1e-9)
            loss = "-" if self.last_loss is None else f"{self.last_loss:.4f}"
            self.console.update(step, rate, {"eps": f"{epsilon:.3f}",
                                             "games": self.num_games,
                                             "mean100": f"{self.mean_100:.2f}", "loss": loss})
            self.last_console, self.last_console_step = now, step
        if self.scalars and now - self.last_scalars >= self.interval:
            with self._lock:
                n, loss_sum, q_sum = self._num_losses, self._loss_sum, self._q_sum
                self._loss_sum = self._q_sum = 0.0
                self._num_losses = 0
            rate = (step - self.last_scalars_step) / (now - self.last_scalars)
            self.scalars.scalars(step, {
                "train/loss": loss_sum / n if n else None,
                "train/mean_q": q_sum / n if n else None,
                "progress/epsilon": epsilon,
                "progress/steps_per_second": rate,
                "progress/replay_fill": self.replay_fill() if self.replay_fill else None})
            self.last_scalars, self.last_scalars_step = now, step

    def state_dict(self, step):
        """What a checkpoint at agent step `step` needs to continue these logs."""
        return {"step": step, "num_games": self.num_games,
                "recent_returns": list(self.recent_returns), "elapsed": self.hours * 3600,
                "positions": {"episodes.csv": self.episodes.file.tell(),
                              "eval.csv": self.evals.file.tell()}}

    def close(self):
        self.console.close()
        if self.scalars:
            self.scalars.close()
        self.episodes.close()
        self.evals.close()
