"""The optimizer's step over all variables as one flat buffer, on JAX (--fused-optimizer).

Keras applies an optimizer variable by variable: on a GPU each of the Nature network's ten
variables costs its own few kernels. Here the weights and each slot are kept as one vector
across a call's K updates, and the step is one elementwise pass. (Weights joined anew each
update would chain slices and joins from one update to the next, which XLA fuses into work
that grows with each: 40 times slower on a CPU, measured.) The arithmetic is Keras's own
`update_step`, operation for operation and in its order, so it matches within float32
rounding (tests/agent/test_update_variants.py).
"""

import math
from typing import NamedTuple

import jax.numpy as jnp
import keras

# The slot lists of the optimizers make_optimizer builds, by their Keras attribute names.
SLOTS = {keras.optimizers.RMSprop: ("_velocities", "_average_gradients"),
         keras.optimizers.Adam: ("_momentums", "_velocities")}


class FlatSlots(NamedTuple):
    """An optimizer's values with every slot joined into one vector, (N,) over N weights."""
    iterations: object    # int32 scalar
    slots: tuple          # one (N,) vector per slot list of SLOTS
    others: list          # the optimizer's values as Keras keeps them, slots left stale


def kind_of(optimizer):
    """The SLOTS entry `optimizer` falls under, or None where it cannot be fused."""
    for kind in SLOTS:
        if type(optimizer) is kind or (isinstance(optimizer, kind) and
                                       type(optimizer).update_step is kind.update_step):
            return kind
    return None


class FusedLayout:
    """Where each slot of a built optimizer sits among its variables, and the weights' shapes.

    Only the step make_optimizer builds fuses: RMSprop (centered, no momentum) or Adam (no
    amsgrad), neither clipping nor decaying weights; any other raises ValueError.
    """

    def __init__(self, optimizer):
        kind = kind_of(optimizer)
        if kind is None or not _plain(optimizer):
            done = ", ".join(k.__name__ for k in SLOTS)
            raise ValueError(f"the fused optimizer step does {done} as make_optimizer builds "
                             f"them, not this {type(optimizer).__name__}")
        self.optimizer, self.kind = optimizer, kind
        position = {id(v): i for i, v in enumerate(optimizer.variables)}
        self.iterations = position[id(optimizer.iterations)]
        self.learning_rate = position[id(optimizer._learning_rate)]
        self.slots = [[position[id(v)] for v in getattr(optimizer, name)]
                      for name in SLOTS[kind]]
        self.shapes = [tuple(v.shape) for v in optimizer._trainable_variables]
        sizes = [math.prod(shape) for shape in self.shapes]
        self.ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]

    def flatten(self, values):
        """The optimizer's values (Keras's list) as FlatSlots."""
        return FlatSlots(values[self.iterations],
                         tuple(_joined([values[i] for i in slot]) for slot in self.slots),
                         list(values))

    def unflatten(self, flat):
        """FlatSlots as the optimizer's values, in Keras's list."""
        values = list(flat.others)
        values[self.iterations] = flat.iterations
        for slot, vector in zip(self.slots, flat.slots):
            for i, part in zip(slot, self.split(vector)):
                values[i] = part
        return values

    def split(self, vector):
        """A flat (N,) vector cut back into the weights' shapes."""
        starts = [0, *self.ends[:-1]]
        return [jnp.reshape(vector[a:b], shape)
                for a, b, shape in zip(starts, self.ends, self.shapes)]

    def join(self, arrays):
        """The weights (or their gradients) as one flat (N,) vector, in the weights' order."""
        return _joined(arrays)

    def step(self, flat, g, w):
        """One optimizer step on all weights, g and w flat (N,): (w after, FlatSlots after)."""
        optimizer = self.optimizer
        lr = flat.others[self.learning_rate].astype(w.dtype)
        if self.kind is keras.optimizers.RMSprop:
            velocity, average = flat.slots
            rho = optimizer.rho
            velocity = rho * velocity + (1 - rho) * jnp.square(g)
            average = rho * average + (1 - rho) * g
            w = w - (lr * g) / jnp.sqrt(velocity - jnp.square(average) + optimizer.epsilon)
            slots = (velocity, average)
        else:
            m, v = flat.slots
            step = (flat.iterations + 1).astype(w.dtype)
            beta_1, beta_2 = optimizer.beta_1, optimizer.beta_2
            alpha = (lr * jnp.sqrt(1 - jnp.power(jnp.asarray(beta_2, w.dtype), step))
                     / (1 - jnp.power(jnp.asarray(beta_1, w.dtype), step)))
            m = m + (g - m) * (1 - beta_1)
            v = v + (jnp.square(g) - v) * (1 - beta_2)
            w = w - (m * alpha) / (jnp.sqrt(v) + optimizer.epsilon)
            slots = (m, v)
        return w, FlatSlots(flat.iterations + 1, slots, flat.others)


def _plain(optimizer):
    """Whether the optimizer does nothing the fused step leaves out (clipping, decay, ...)."""
    unused = (optimizer.clipnorm, optimizer.clipvalue, optimizer.global_clipnorm,
              optimizer.weight_decay, optimizer.use_ema, optimizer.gradient_accumulation_steps,
              getattr(optimizer, "momentum", 0), getattr(optimizer, "amsgrad", False))
    return not any(unused) and getattr(optimizer, "centered", True)


def _joined(arrays):
    return jnp.concatenate([jnp.reshape(a, (-1,)) for a in arrays])
