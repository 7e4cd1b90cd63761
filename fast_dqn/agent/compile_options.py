"""How the learner's calls compile and run: each choice changes speed, never the math."""

from typing import NamedTuple


class CompileOptions(NamedTuple):
    """The learner's compile choices (docs/options.md); the defaults are the tested ones.

    The results match within float32 rounding (tests/agent/test_update_variants.py), except
    that deterministic=False lets a GPU sum in any order, so a seeded run no longer repeats.
    """
    xla: bool = False               # TensorFlow: jit_compile (JAX always compiles with XLA)
    scan_unroll: int = 0            # JAX: updates per iteration of a call's loop of K;
    #                                 0: all K on a CPU, 1 on a GPU
    fused_optimizer: bool = False   # JAX: one optimizer step over all weights as one vector
    deterministic: bool = True      # deterministic GPU kernels
    act_on_cpu: bool = False        # JAX: target_q on the CPU, from a copy of the target

    def unroll(self, platform):
        """The scan's unroll on a platform.

        XLA:CPU runs convolutions inside a while loop 7 times slower (the Nature CNN at batch 32 on
        xeon-amx: 382 ms an update in a rolled scan of 16, 52 ms alone, 41 ms unrolled; unrolled by
        4, still 390), so a CPU unrolls all K; a GPU keeps the loop and compiles once, whatever K.

        Args:
            platform: JAX's name of the device that trains: "cpu", "gpu", ...

        Returns:
            jax.lax.scan's unroll: updates per iteration, or True for all K.
        """
        if self.scan_unroll:
            return self.scan_unroll
        return True if platform == "cpu" else 1
