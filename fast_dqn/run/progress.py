"""What a run shows on the console: a live tqdm bar on a terminal, plain lines otherwise.

Lines suit logs and pipes (`tee`, nohup, CI); a bar would fill them with carriage returns.
"""

import sys


def _format_duration(seconds):
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    return f"{days}d{hours:02d}h" if days else f"{hours}h{minutes:02d}m"


class ProgressLines:
    """A full status line every `interval` seconds."""

    def __init__(self, total, initial=0, out=None, interval=10.0):
        self.total = total
        self.out = out or sys.stdout
        self.interval = interval

    def update(self, step, rate, fields):
        eta = _format_duration((self.total - step) / rate) if rate > 0 else "?"
        extra = " | ".join(f"{k} {v}" for k, v in fields.items())
        self.message(f"step {step:,}/{self.total:,} ({100 * step / self.total:.1f}%) | "
                     f"{rate:,.0f} steps/s | {extra} | ETA {eta}")

    def message(self, line):
        print(line, file=self.out, flush=True)

    def close(self):
        pass


class ProgressBar:
    """tqdm's bar: agent steps, steps/s and ETA, with epsilon, returns and loss after it."""

    def __init__(self, total, initial=0, out=None, interval=0.5):
        from tqdm import tqdm
        self.out = out or sys.stdout
        self.interval = interval
        self.bar = tqdm(total=total, initial=initial, unit="step", unit_scale=True,
                        dynamic_ncols=True, file=self.out, smoothing=0.05)

    def update(self, step, rate, fields):
        self.bar.set_postfix(fields, refresh=False)
        self.bar.update(step - self.bar.n)

    def message(self, line):
        self.bar.write(line, file=self.out)

    def close(self):
        self.bar.close()


def make_console(total, initial=0, out=None, interval=10.0):
    """A bar when `out` is a terminal, lines every `interval` seconds when it is not."""
    out = out or sys.stdout
    if hasattr(out, "isatty") and out.isatty():
        return ProgressBar(total, initial, out)
    return ProgressLines(total, initial, out, interval)
