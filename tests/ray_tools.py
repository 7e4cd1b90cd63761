"""Helpers for the tests that run Ray: a clean environment, and finding Ray's processes."""

import os
import time

import psutil

# Settings a developer's shell may carry that would point a test at another cluster or auth.
RAY_SETTINGS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def environment_without_ray_settings():
    return {k: v for k, v in os.environ.items() if k not in RAY_SETTINGS}


RAY_PROCESS_MARKS = ("raylet", "gcs_server", "ray::", "default_worker.py", "runtime_env",
                     "log_monitor.py", "dashboard", "plasma_store")


def ray_processes():
    """PIDs of every running process that belongs to some Ray cluster."""
    found = set()
    for proc in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            text = " ".join([proc.info["name"] or ""] + (proc.info["cmdline"] or []))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(mark in text for mark in RAY_PROCESS_MARKS):
            found.add(proc.info["pid"])
    return found


def wait_until_gone(before, seconds=20.0):
    """The Ray processes started since `before` that are still alive after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        left = ray_processes() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
