"""evaluate --export: the main network as a .keras file of Keras's built-in layers, in
float32, that keras.saving.load_model reads without fast-dqn and that computes the run's own
Q-values (fast_dqn.agent.export)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from fast_dqn.agent.export import portable_copy
from fast_dqn.agent.q_network import DuelingCombine, ScaleFrames, mlp, nature_cnn


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("network", ["cnn", "mlp"])
def test_the_copy_computes_the_networks_q_values_with_built_in_layers(network, dueling):
    rng = np.random.default_rng(0)
    if network == "cnn":
        model = nature_cnn((4, 84, 84), 6, dueling=dueling)
        states = rng.integers(0, 256, (8, 4, 84, 84)).astype(np.uint8)
    else:
        model = mlp((4,), 2, dueling=dueling)
        states = rng.normal(size=(8, 4)).astype(np.float32)
    # Trained weights are not the initial ones: the advantages' mean must really matter.
    model.set_weights([w + rng.normal(scale=0.05, size=w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    copy = portable_copy(model)
    assert not any(isinstance(layer, (ScaleFrames, DuelingCombine)) for layer in copy.layers)
    assert all(type(layer).__module__.startswith("keras.") for layer in copy.layers)
    np.testing.assert_allclose(copy.predict(states, verbose=0),
                               model.predict(states, verbose=0), rtol=1e-5, atol=1e-5)


@pytest.mark.backends
def test_the_copy_of_a_bfloat16_network_is_float32():
    model = nature_cnn((4, 84, 84), 4, dtype_policy="mixed_bfloat16", dueling=True)
    copy = portable_copy(model)
    assert {layer.dtype_policy.name for layer in copy.layers} == {"float32"}
    for a, b in zip(copy.get_weights()[:6], model.get_weights()[:6]):  # the convolutions
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """A short dueling CartPole run in process, with a checkpoint and best/."""
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    logdir = tmp_path_factory.mktemp("export") / "run"
    argv = ["--env=CartPole-v1", "--dueling", "--timesteps=600", "--prepopulate=200",
            "--evaluate=300", "--eval-episodes=1", f"--logdir={logdir}"]
    assert cli.main(NATURE, argv) == 0
    return logdir


@pytest.mark.slow  # a real run, in process
def test_export_writes_what_load_model_reads_and_it_acts_as_the_run(cartpole_run, tmp_path,
                                                                   capsys):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    from fast_dqn.tools.evaluate import main
    path = tmp_path / "agent.keras"
    assert main([str(cartpole_run), f"--export={path}"]) == 0
    out = capsys.readouterr().out
    assert f"to {path}: float32, input float32 (1, 4), output the Q-value of each of its 2 " \
        "actions" in out
    loaded = keras.saving.load_model(path)
    assert loaded.name == "fast_dqn_CartPole_v1_step_600"
    # The same Q-values as the checkpoint's main network, rebuilt here as training does.
    weights = CheckpointStore(str(cartpole_run)).latest().load_state()["learner"]["main"]
    network = mlp((1, 4), 2, dueling=True)  # a history of 1 observation
    network.set_weights(weights)
    states = np.random.default_rng(1).normal(size=(16, 1, 4)).astype(np.float32)
    np.testing.assert_allclose(loaded.predict(states, verbose=0),
                               network.predict(states, verbose=0), rtol=1e-5, atol=1e-5)
    # --best exports best/'s weights, which are another step's.
    best = tmp_path / "best.keras"
    assert main([str(cartpole_run), "--best", f"--export={best}"]) == 0
    assert "the best evaluation: agent step" in capsys.readouterr().out
    assert keras.saving.load_model(best).name.startswith("fast_dqn_CartPole_v1_step_")


@pytest.mark.parametrize("argv, words", [
    (["--export={tmp}/agent.h5"], "does not end in .keras"),
    (["--export={tmp}/missing/agent.keras"], "does not exist"),
    (["--export={tmp}/taken.keras"], "exists and would be overwritten"),
    (["--export={tmp}/a.keras", "--video={tmp}/a.mp4"], "records no video"),
])
def test_a_bad_export_path_is_one_line_and_nothing_is_lost(tmp_path, capsys, argv, words):
    """Refused before the run is read: the path is the user's to fix first."""
    from fast_dqn.tools.evaluate import main
    (tmp_path / "taken.keras").write_text("the user's file")
    code = main([str(tmp_path / "run")] + [a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert (tmp_path / "taken.keras").read_text() == "the user's file"
    assert sorted(os.listdir(tmp_path)) == ["taken.keras"]


@pytest.mark.slow  # starts a Python with JAX
@pytest.mark.backends
def test_the_export_loads_on_jax_without_fast_dqn(cartpole_run, tmp_path):
    pytest.importorskip("jax")  # the JAX backend is optional (the jax extra)
    from fast_dqn.tools.evaluate import main
    path = tmp_path / "agent.keras"
    assert main([str(cartpole_run), f"--export={path}"]) == 0
    states = np.random.default_rng(2).normal(size=(4, 1, 4)).astype(np.float32)
    np.save(tmp_path / "states.npy", states)
    expected = keras.saving.load_model(path).predict(states, verbose=0)
    # Checked after the load: Keras would import a custom layer's module to load it.
    script = ("import keras, numpy as np, sys\n"
              "m = keras.saving.load_model('agent.keras')\n"
              "np.save('q.npy', np.asarray(m.predict(np.load('states.npy'), verbose=0)))\n"
              "assert not [name for name in sys.modules if name.startswith('fast_dqn')]\n"
              "print(keras.backend.backend())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**env, "KERAS_BACKEND": "jax"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "jax"
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), expected, rtol=1e-5, atol=1e-5)
