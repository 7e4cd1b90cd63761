"""What a checkpoint's state must hold before a run or a tool reads any of it.

A state.json edited together with its manifest verifies, and a checkpoint written by some
other program may too. The run reads that state in many places (the logs are cut back to it,
best/ is made to match it, the RNGs are set from it), so a value of the wrong kind would fail
far from its cause, with a traceback, and possibly after a log was already rewritten. The
values those places read are therefore checked here first, each named by its path. Deeper
contents (the weights' shapes, a game's emulator state) are checked by the component that
loads them; `StateMismatch` is what both raise.
"""

import numpy as np


class StateMismatch(Exception):
    """A checkpoint's state does not have the form this fast-dqn writes."""


class Kind:
    """One kind of value: its name, for the message, and its test.

    Args:
        name: how a message names the kind ("a whole number").
        test: a function of one value, true where the value is of the kind.
        flaw: flaw(value, path) -> the message for a value the test refuses, or None for
            the usual "PATH is VALUE, not NAME"; None: always the usual one.
    """

    def __init__(self, name, test, flaw=None):
        self.name, self.test, self.flaw = name, test, flaw


def _whole(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
        and value >= 0


def _number(value):
    # json.load reads NaN and Infinity; no number a run saves is either.
    return isinstance(value, (int, float, np.integer, np.floating)) \
        and not isinstance(value, (bool, np.bool_)) and bool(np.isfinite(value))


WHOLE = Kind("a whole number", _whole)
NUMBER = Kind("a number", _number)
FLAG = Kind("true or false", lambda value: isinstance(value, (bool, np.bool_)))
TEXT = Kind("a string", lambda value: isinstance(value, str))
BYTES = Kind("bytes", lambda value: isinstance(value, bytes))
ARRAY = Kind("an array", lambda value: isinstance(value, np.ndarray))
TABLE = Kind("an object", lambda value: isinstance(value, dict))
# Weights and optimizer slots (Keras keeps its step count as a numpy scalar).
ARRAYS = Kind("a list of arrays", lambda value: isinstance(value, list)
              and all(isinstance(item, (np.ndarray, np.generic)) for item in value))


def _not_finite(item):
    # "float" in the name: bfloat16 (ml_dtypes) is of numpy kind "V".
    return (item.dtype.kind in "fc" or "float" in str(item.dtype)) \
        and not bool(np.all(np.isfinite(item)))


def _first_not_finite(value, path):
    if not ARRAYS.test(value):
        return None  # the usual message: not even a list of arrays
    i = next(i for i, item in enumerate(value) if _not_finite(item))
    return f"{path}/{i} holds a NaN or an infinity"


# The weights of best/ and of a checkpoint's best: the learner checks them finite before it
# hands them out, so a NaN or an infinity there was put in afterwards, by an edit or damage.
FINITE_ARRAYS = Kind("a list of finite arrays", lambda value: ARRAYS.test(value)
                     and not any(_not_finite(item) for item in value), _first_not_finite)
NUMBERS = Kind("a list of numbers", lambda value: isinstance(value, list)
               and all(_number(item) for item in value))
COUNTS = Kind("an object of whole numbers", lambda value: isinstance(value, dict)
              and all(_whole(item) for item in value.values()))
TEXTS = Kind("a list of strings", lambda value: isinstance(value, list)
             and all(isinstance(item, str) for item in value))
TABLES = Kind("a list of objects", lambda value: isinstance(value, list)
              and all(isinstance(item, dict) for item in value))
# EpisodicLife's held reset after a lost life; its info holds counts and flags
# (FullGameStats adds game_over).
OBSERVATION_AND_INFO = Kind("an (observation, info) pair", lambda value: isinstance(
    value, tuple) and len(value) == 2 and isinstance(value[0], np.ndarray)
    and isinstance(value[1], dict) and all(_whole(item) or isinstance(item, (bool, np.bool_))
                                           for item in value[1].values()))
# The fast loop's held chunks: (frames, actions, rewards, terminated, episode_ends, shards).
HELD = Kind("a list of 6-tuples of arrays", lambda value: isinstance(value, list) and all(
    isinstance(chunk, tuple) and len(chunk) == 6
    and all(isinstance(item, np.ndarray) for item in chunk) for chunk in value))
SHAPE = Kind("a tuple of whole numbers", lambda value: isinstance(value, tuple)
             and all(_whole(item) for item in value))


def optional(kind):
    """The schema that allows null or what `kind` allows.

    Args:
        kind: a Kind, or {key: schema} for an object.

    Returns:
        A Kind for a Kind; for an object's schema, the marker ("optional", schema), which
        `check_state` reads.
    """
    return Kind(f"null or {kind.name}", lambda value: value is None or kind.test(value)) \
        if isinstance(kind, Kind) else ("optional", kind)


def _only_whole_numbers(value):
    """Whether every number in a bit generator's state is whole: numpy would take a boolean as
    0 or 1 and a float as its integer part."""
    if isinstance(value, dict):
        return all(_only_whole_numbers(item) for item in value.values())
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "iu"
    return isinstance(value, str) or _whole(value)


def _loads_into(make, check=lambda state: True):
    """A test that tries a bit generator's state on a scratch generator: numpy knows best what
    its states hold; `check` tests what numpy does not."""
    def test(value):
        if not isinstance(value, dict) or not _only_whole_numbers(value):
            return False
        try:
            make().state = value
        except (TypeError, ValueError, KeyError, IndexError, OverflowError):
            return False
        return check(value)
    return test


# A numpy bit generator's state, as `Generator.bit_generator.state` gives it (every RNG of a
# run is numpy's default, PCG64, but GameStart's, ale-py's MT19937). numpy does not bound
# MT19937's position in its key, which the C code then reads past.
RNG = Kind("a PCG64 generator's state", _loads_into(lambda: np.random.PCG64(0)))
MT19937_RNG = Kind("an MT19937 generator's state", _loads_into(
    lambda: np.random.MT19937(0), lambda state: 0 <= state["state"]["pos"] <= 624))
SCHEDULE = {"train_start": WHOLE, "refill_until": WHOLE, "deferred": WHOLE}
LEARNER = {"main": ARRAYS, "target": ARRAYS, "optimizer": ARRAYS}
IDENTITY = {"game": optional(TEXT), "env": optional(TEXT), "num_actions": WHOLE,
            "observation_shape": SHAPE}

# What both loops save (fast_dqn.run.training.RunParts.collect).
RUN = {
    "identity": IDENTITY,
    "settings": TABLE,
    "learner": LEARNER,
    "replay": {"pointers": ARRAY, "sizes": ARRAY, "rng": RNG},
    "monitor": {"step": WHOLE, "num_games": WHOLE, "recent_returns": NUMBERS,
                "elapsed": NUMBER, "logs": {"episodes.csv": BYTES, "eval.csv": BYTES},
                "tensorboard": optional({"files": COUNTS})},
    "rngs": {"action": RNG},
    "best": optional({"step": WHOLE, "mean": NUMBER, "weights": FINITE_ARRAYS}),
}

# Each loop's own parts: its games, and its loop state (NatureLoop and FastLoopState).
# One game (fast_dqn.envs.environment.env_state); the loader checks the layers match.
GAME = {"layers": TEXTS, "states": TABLES, "foreign": optional(BYTES)}

NATURE_RUN = {**RUN, "env": GAME,
              "loop": {"step": WHOLE, "obs": ARRAY, "eval_pending": FLAG,
                       "last_eval": optional(WHOLE), "schedule": SCHEDULE}}
FAST_RUN = {**RUN, "samplers": {"backend": TEXT},
            "loop": {"step": WHOLE, "trained_through": WHOLE, "last_eval": optional(WHOLE),
                     "owed": WHOLE, "held": HELD, "sync_pending": FLAG, "eval_pending": FLAG,
                     "boundary": FLAG, "schedule": SCHEDULE}}

# What `evaluate` reads of a checkpoint, and of an export in best/
# (fast_dqn.run.storage.best_weights).
WEIGHTS_ONLY = {"identity": IDENTITY, "learner": LEARNER}
BEST_EXPORT = {"mean": NUMBER, "weights": FINITE_ARRAYS}


def check_state(state, schema, path=""):
    """Check that `state` has the form `schema` describes, before anything reads it.

    Args:
        state: a checkpoint's state, or a part of it, as loaded.
        schema: a Kind, or {key: schema} for an object holding at least those keys (a later
            release may add keys; the loaders ignore them), or optional({...}).
        path: where `state` sits in the checkpoint ("/loop"), which the error names; "" for
            the top.

    Raises:
        StateMismatch: naming the first value of `state` that `schema` does not allow, by
            its path.
    """
    if isinstance(schema, tuple):  # optional({...})
        if state is not None and not isinstance(state, dict):
            raise StateMismatch(f"{path or '/'} is {_shown(state)}, not null or an object")
        if state is not None:
            check_state(state, schema[1], path)
        return
    if isinstance(schema, Kind):
        if not schema.test(state):
            flaw = schema.flaw and schema.flaw(state, path)
            raise StateMismatch(flaw or f"{path or '/'} is {_shown(state)}, not {schema.name}")
        return
    if not isinstance(state, dict):
        raise StateMismatch(f"{path or '/'} is {_shown(state)}, not an object")
    for key, item in schema.items():
        if key not in state:
            raise StateMismatch(f"{path or '/'} has no \"{key}\"")
        check_state(state[key], item, f"{path}/{key}")


def _shown(value):
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"
