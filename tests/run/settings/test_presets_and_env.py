"""Presets, their precedence, --env and --list-games."""

import json

import pytest
from helpers import run

from fast_dqn.errors import ConfigError
from fast_dqn.run import cli
from fast_dqn.run.run_kinds import NATURE
from fast_dqn.run.settings import flags, precedence
from fast_dqn.run.settings.hyperparameters import Config, FastConfig
from fast_dqn.run.settings.presets import PRESETS


def parse(argv, config_class=Config):
    parser = flags.build_parser("x", "y", config_class)
    return precedence.config_from_args(parser.parse_args(argv), config_class)


def test_nature_is_the_default_and_changes_nothing():
    config = parse([])
    assert config.preset == "nature" and config == Config(preset="nature")


def test_a_preset_replaces_the_defaults():
    config = parse(["--preset", "machado"])
    assert (config.sticky_actions, config.full_action_space, config.episodic_life) == (
        0.25, True, False)
    assert config.noop_max == 0 and config.evaluate == 0
    assert config.lr == Config.lr  # what the preset leaves alone keeps its default
    quick = parse(["--preset=pong-quick"])
    for name, value in PRESETS["pong-quick"].items():
        assert getattr(quick, name) == value


def test_explicit_flags_win_over_the_preset():
    config = parse(["--preset", "pong-quick", "--lr", "5e-5", "--target-update-freq=2000"])
    assert config.lr == 5e-5 and config.target_update_freq == 2000
    assert config.optimizer == "adam"  # still from the preset
    # Order on the command line does not matter.
    assert parse(["--lr", "5e-5", "--preset", "pong-quick"]).lr == 5e-5
    # A flag given explicitly at its default value still beats the preset.
    assert parse(["--preset", "machado", "--sticky-actions", "0"]).sticky_actions == 0.0


def test_pong_fastest_is_pong_quick_with_the_extensions_and_larger_rarer_minibatches():
    quick, fast = parse(["--preset=pong-quick"]), parse(["--preset=pong-fastest"])
    changed = {name for name in Config.__dataclass_fields__
               if getattr(quick, name) != getattr(fast, name)}
    assert changed == {"preset", "double", "dueling", "n_step", "train_freq", "batch_size",
                       "precision"}
    assert (fast.double, fast.dueling, fast.n_step, fast.precision) == (True, True, 3, "auto")
    assert (fast.train_freq, fast.batch_size) == (4, 128)
    assert fast.batch_size / fast.train_freq == quick.batch_size / quick.train_freq  # 32 each


@pytest.mark.parametrize("argv,setting", [
    (["--preset", "dopamine", "--env", "CartPole-v1"], "preset"),
    (["--preset", "machado", "--env", "CartPole-v1"], "preset"),
    (["--network", "dopamine", "--env", "CartPole-v1"], "network"),
    (["--optimizer", "adam", "--rmsprop-init", "1"], "rmsprop_init"),
])
def test_settings_that_cannot_apply_are_refused_by_name(argv, setting):
    from fast_dqn.run.settings.validation import resolve
    with pytest.raises(ConfigError) as error:
        resolve(parse(argv))
    assert error.value.setting == setting


def test_another_optimizer_drops_the_presets_rmsprop_settings():
    config = parse(["--preset", "dopamine", "--optimizer", "adam"])
    assert (config.rmsprop_init, config.optimizer_epsilon, config.loss_reduction) == (
        0.0, None, None)


def test_env_picks_the_classic_preset_and_the_python_backend():
    config = parse(["--env", "CartPole-v1"], FastConfig)
    assert config.preset == "classic" and config.game is None
    assert config.history_length == 1 and config.env_backend == "python"
    assert parse(["--env", "CartPole-v1", "--preset", "nature"]).history_length == 4


@pytest.mark.parametrize("argv,config_class,setting", [
    (["--env", "CartPole-v1", "--game", "pong"], Config, "env"),
    (["--env", "CartPole-v1", "--preset", "pong-quick"], Config, "preset"),
    (["--env", "CartPole-v1", "--env-backend", "vector"], FastConfig, "env_backend"),
])
def test_conflicting_environment_flags_name_the_setting(argv, config_class, setting):
    with pytest.raises(ConfigError) as error:
        parse(argv, config_class)
    assert error.value.setting == setting


@pytest.mark.parametrize("name,message", [
    ("CartPol-v1", "did you mean CartPole-v1"),
    ("ALE/Pong-v5", "use game Pong for"),
    ("Pendulum-v1", "discrete"),
])
def test_unusable_gym_envs_are_refused(name, message):
    from fast_dqn.envs.environment import check_gym_env
    with pytest.raises(ConfigError, match=message):
        check_gym_env(name)


def test_config_json_records_the_final_values(tmp_path):
    logdir = tmp_path / "run"
    code = cli.main(NATURE, ["--preset", "pong-quick", "--lr", "5e-5", f"--logdir={logdir}"],
                    train=lambda config, **kw: None)
    assert code == 0
    saved = json.loads((logdir / "config.json").read_text())
    assert saved["preset"] == "pong-quick" and saved["lr"] == 5e-5
    assert saved["replay_capacity"] == PRESETS["pong-quick"]["replay_capacity"]


def test_list_games_prints_the_installed_roms():
    from fast_dqn.envs.games import available_games
    result = run("run_fast_dqn.py", ["--list-games"], timeout=120)
    assert result.returncode == 0
    games = result.stdout.split()
    assert games == available_games() and {"pong", "breakout", "space_invaders"} <= set(games)


@pytest.mark.parametrize("explicit,expected", [
    ({}, ("rmsprop", 0.01, "sum")),                                   # Nature
    ({"preset": "pong-quick"}, ("adam", 1e-8, "mean")),               # Lapan's PyTorch Adam
    ({"optimizer": "adam"}, ("adam", 1e-8, "mean")),
    ({"env": "CartPole-v1"}, ("adam", 1.5e-4, "mean")),               # classic, measured
    ({"env": "CartPole-v1", "optimizer": "rmsprop"}, ("rmsprop", 0.01, "sum")),
    ({"optimizer_epsilon": 1e-5, "loss_reduction": "mean"}, ("rmsprop", 1e-5, "mean")),
])
def test_each_optimizer_takes_its_sources_epsilon_and_loss_reduction(explicit, expected):
    from fast_dqn.run.settings.hyperparameters import FastConfig
    from fast_dqn.run.settings.precedence import build_config
    from fast_dqn.run.settings.validation import resolve_optimizer
    config = resolve_optimizer(build_config(explicit, FastConfig))
    assert (config.optimizer, config.optimizer_epsilon, config.loss_reduction) == expected


def test_the_dqn_extensions_are_off_by_default_and_flags_turn_them_on():
    config = parse([])
    assert (config.double, config.dueling, config.n_step, config.precision) == (
        False, False, 1, "float32")
    config = parse(["--double", "--dueling", "--n-step", "3", "--precision", "bfloat16"])
    assert (config.double, config.dueling, config.n_step, config.precision) == (
        True, True, 3, "bfloat16")


@pytest.mark.parametrize("argv, setting", [
    (["--n-step", "0"], "n_step"),
    (["--mixed-precision", "--precision", "bfloat16"], "mixed_precision"),
])
def test_impossible_extension_values_name_their_flag(argv, setting):
    with pytest.raises(ConfigError) as error:
        cli.validate_and_resolve(parse(argv))
    assert error.value.setting == setting


@pytest.mark.backends
def test_mixed_precision_is_the_older_name_of_float16(tmp_path, monkeypatch):
    from fast_dqn.agent import backend_setup
    monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: [(8, 0)])
    config = cli.validate_and_resolve(parse(["--mixed-precision", f"--logdir={tmp_path / 'r'}"]))
    assert config.precision == "float16"
    # It wins over a preset's auto, which the user did not type.
    config = cli.validate_and_resolve(parse(["--preset=pong-fastest", "--mixed-precision",
                                             f"--logdir={tmp_path / 'r'}"]))
    assert config.precision == "float16"


@pytest.mark.backends
def test_bfloat16_is_refused_where_the_hardware_cannot_compute_it(tmp_path, monkeypatch):
    from fast_dqn.agent import backend_setup
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t: fpu sse2 avx2 avx512f\n")
    assert not backend_setup.cpu_computes_bfloat16(str(cpuinfo))
    cpuinfo.write_text("flags\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    assert backend_setup.cpu_computes_bfloat16(str(cpuinfo))
    monkeypatch.setattr(backend_setup, "cpu_computes_bfloat16", lambda: True)
    for gpus, accepted in (([], True), ([(7, 5)], False), ([(8, 0)], True)):
        monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: gpus)
        argv = ["--precision", "bfloat16", f"--logdir={tmp_path / 'r'}"]
        if accepted:
            assert cli.validate_and_resolve(parse(argv)).precision == "bfloat16"
        else:  # the GPU trains, and a pre-Ampere one would emulate bfloat16
            with pytest.raises(ConfigError, match="GPU from Ampere on") as error:
                cli.validate_and_resolve(parse(argv))
            assert error.value.setting == "precision"
    monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: [])
    monkeypatch.setattr(backend_setup, "cpu_computes_bfloat16", lambda: False)
    with pytest.raises(ConfigError, match="AVX512-BF16 or AMX"):
        cli.validate_and_resolve(parse(["--precision", "bfloat16",
                                        f"--logdir={tmp_path / 'r'}"]))


@pytest.mark.backends
def test_float16_is_refused_where_only_emulated(tmp_path, monkeypatch):
    from fast_dqn.agent import backend_setup
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t: fpu avx2 avx512f avx512_bf16\n")
    assert not backend_setup.cpu_computes_float16(str(cpuinfo))
    cpuinfo.write_text("flags\t: fpu avx2 avx512f avx512_fp16\n")
    assert backend_setup.cpu_computes_float16(str(cpuinfo))
    monkeypatch.setattr(backend_setup, "cpu_computes_float16", lambda: False)
    for gpus, accepted in (([], False), ([(7, 5)], True)):
        monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: gpus)
        for argv, setting in ((["--precision", "float16"], "precision"),
                              (["--mixed-precision"], "mixed_precision")):
            argv = argv + [f"--logdir={tmp_path / 'r'}"]
            if accepted:
                assert cli.validate_and_resolve(parse(argv)).precision == "float16"
                continue
            with pytest.raises(ConfigError, match="float16 needs a GPU") as error:
                cli.validate_and_resolve(parse(argv))
            assert error.value.setting == setting


@pytest.mark.slow  # the real command line, TensorFlow included
@pytest.mark.backends
def test_bfloat16_on_this_machine_runs_where_it_is_native_and_is_refused_elsewhere(tmp_path):
    # Unpatched, so the answer is this machine's own: every CPU that runs the suite checks
    # one side, an AVX2-only one the refusal, one with AVX512-BF16 or AMX (or an Ampere GPU)
    # a real run in bfloat16.
    from fast_dqn.agent.backend_setup import computes_bfloat16
    run_dir = tmp_path / "run"
    result = run("run_dqn.py", ["--env=CartPole-v1", "--precision", "bfloat16", "--timesteps=300",
                                "--prepopulate=100", "--evaluate=0", f"--logdir={run_dir}"],
                 timeout=180)
    if computes_bfloat16():
        assert result.returncode == 0, result.stderr[-3000:]
        assert json.loads((run_dir / "config.json").read_text())["precision"] == "bfloat16"
    else:
        assert result.returncode == 2, result.stderr[-3000:]
        assert len(result.stderr.strip().splitlines()) == 1
        assert "--precision" in result.stderr and "AVX512-BF16 or AMX" in result.stderr
        assert not run_dir.exists()


@pytest.mark.parametrize("gpus, cpu_bfloat16, expected", [
    ([], True, "bfloat16"),                 # a CPU with AMX or AVX512-BF16, like this one
    ([], False, "float32"),                 # bfloat16 would be emulated, several times slower
    ([(7, 5)], True, "float32"),            # a pre-Ampere GPU trains, whatever the CPU has
    ([(8, 0)], False, "bfloat16"),          # Ampere, the first with bfloat16
    ([(8, 6)], False, "bfloat16"),
    ([(8, 0), (7, 0)], True, "float32"),    # every GPU must compute it
])
@pytest.mark.backends
def test_precision_auto_becomes_what_the_hardware_computes(tmp_path, monkeypatch, gpus,
                                                           cpu_bfloat16, expected):
    from fast_dqn.agent import backend_setup
    monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: gpus)
    monkeypatch.setattr(backend_setup, "cpu_computes_bfloat16", lambda: cpu_bfloat16)
    config = cli.validate_and_resolve(parse(["--precision", "auto",
                                             f"--logdir={tmp_path / 'r'}"]))
    assert config.precision == expected


@pytest.mark.parametrize("typed,game", [("PongNoFrameskip-v4", "pong"), ("ALE/Pong-v5", "pong"),
                                        ("SpaceInvadersNoFrameskip-v4", "space_invaders"),
                                        ("Breakout-ramDeterministic-v4", "breakout")])
def test_a_gymnasium_id_is_answered_with_the_game_it_names(typed, game):
    """Gym-style ids name settings (v4: no sticky actions; v5: 0.25) that fast-dqn sets with
    its own flags, so the id is not taken as the game; the answer names the --game to type."""
    from fast_dqn.envs.games import resolve_game
    games = ["breakout", "pong", "space_invaders"]
    with pytest.raises(ConfigError) as caught:
        resolve_game(typed, games)
    assert f"'{typed}' is a gymnasium id" in str(caught.value)
    assert f"did you mean --game {game}?" in str(caught.value)
    assert "--list-games" in str(caught.value)
    for unknown in ("Foo-v5", "xyzzy"):
        with pytest.raises(ConfigError, match=f"unknown game '{unknown}'; --list-games"):
            resolve_game(unknown, games)


def test_an_env_runs_config_json_records_no_atari_setting_and_resumes(tmp_path, capsys):
    """A gymnasium --env run uses no Atari protocol: config.json records those settings as
    null, not the Atari defaults it never applied, and a resume reads them back."""
    import json

    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import FAST, NATURE
    from fast_dqn.run.settings import hyperparameters as hp
    for kind in (NATURE, FAST):
        logdir = tmp_path / kind.loop
        seen = []
        assert cli.main(kind, ["--env=CartPole-v1", f"--logdir={logdir}"],
                        train=lambda config, **kw: seen.append(config)) == 0
        saved = json.loads((logdir / "config.json").read_text())
        assert {name: saved[name] for name in hp.ATARI_ONLY} == dict.fromkeys(hp.ATARI_ONLY)
        assert saved["history_length"] == seen[0].history_length  # what it does use
        assert cli.main(kind, [f"--resume={logdir}"],
                        train=lambda config, **kw: seen.append(config)) == 0
        assert seen[1] == seen[0]
    # Typed beside --env, such a setting would be ignored: one line, nothing made.
    code = cli.main(NATURE, ["--env=CartPole-v1", "--noop-max=5",
                             f"--logdir={tmp_path / 'x'}"], train=lambda config, **kw: None)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and err.endswith("--noop-max: is a setting of the Atari protocol, which a "
                                      "gymnasium --env run does not use; drop it")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("preset", ["nature", "machado", "dopamine", "pong-quick",
                                    "pong-fastest"])
@pytest.mark.parametrize("workers", [16, 32, 64])
def test_every_preset_runs_at_16_32_and_64_workers(tmp_path, preset, workers):
    """pong-fastest's target period, 1,000, is a multiple of none of them: its periods end
    at the first round past each multiple (tests/loops/test_fast_loop.py counts the minibatches)."""
    config = cli.validate_and_resolve(parse([f"--preset={preset}", f"--workers={workers}",
                                             f"--logdir={tmp_path / 'r'}"], FastConfig))
    assert config.workers == workers


@pytest.mark.parametrize("typed,accelerator,concurrent,expected", [
    ("auto", None, True, "host"),                        # a CPU: no second copy in RAM
    ("device", None, True, "device"),                    # asked for: a second copy in RAM
    ("auto", ("GPU:0", 100 * 2**30), True, "device"),    # room on the GPU
    ("auto", ("GPU:0", 2**29), True, "host"),            # 0.66 GiB in 0.5 GiB free
    ("auto", ("GPU:0", None), True, "host"),             # TensorFlow: its room is unknown
    ("device", ("GPU:0", None), True, "device"),
    ("host", ("GPU:0", 100 * 2**30), True, "host"),
    ("device", ("GPU:0", 100 * 2**30), False, "host"),   # lockstep trains one at a time
])
def test_replay_device_auto_becomes_where_replay_fits(tmp_path, monkeypatch, typed,
                                                      accelerator, concurrent, expected):
    from fast_dqn.agent import backend_setup
    monkeypatch.setattr(backend_setup, "accelerator_memory", lambda: accelerator)
    argv = ["--replay-capacity=100000", f"--replay-device={typed}",
            f"--logdir={tmp_path / 'r'}"] + ([] if concurrent else ["--no-concurrent"])
    config = cli.validate_and_resolve(parse(argv, FastConfig))
    assert config.replay_device == expected
    # --updates-per-call 0 (the default) is the K of the device that trains; a K typed stays.
    assert config.updates_per_call == (16 if accelerator is None else 64)
    typed_k = cli.validate_and_resolve(parse(argv + ["--updates-per-call=7"], FastConfig))
    assert typed_k.updates_per_call == 7


@pytest.mark.parametrize("more,accelerator,expected", [
    ([], None, 1),                                       # 2 CPU cores: two lost (0.83)
    ([], ("GPU:0", 100 * 2**30), 2),                     # an H200: 1.27 times one
    (["--sampler-groups=1"], ("GPU:0", 100 * 2**30), 1),  # typed: kept
    (["--workers=7"], ("GPU:0", 100 * 2**30), 1),        # an odd W cannot split
    (["--env-backend=python"], ("GPU:0", 100 * 2**30), 1),
    (["--no-synchronize"], ("GPU:0", 100 * 2**30), 1),
])
def test_sampler_groups_0_is_two_on_a_gpu_where_the_games_can(tmp_path, monkeypatch, more,
                                                             accelerator, expected):
    from fast_dqn.agent import backend_setup
    from fast_dqn.run.settings.validation import chunk_size
    monkeypatch.setattr(backend_setup, "accelerator_memory", lambda: accelerator)
    argv = ["--replay-capacity=100000", f"--logdir={tmp_path / 'r'}", *more]
    config = cli.validate_and_resolve(parse(argv, FastConfig))
    assert config.sampler_groups == expected
    assert chunk_size(config) == config.workers // expected


def test_a_replay_the_device_cannot_hold_is_refused_in_one_line(tmp_path, monkeypatch):
    from fast_dqn.agent import backend_setup
    monkeypatch.setattr(backend_setup, "accelerator_memory", lambda: ("GPU:0", 4 * 2**30))
    with pytest.raises(ConfigError) as error:
        cli.validate_and_resolve(parse(["--replay-capacity=1000000", "--replay-device=device",
                                        f"--logdir={tmp_path / 'r'}"], FastConfig))
    assert error.value.setting == "replay_device"
    worded = error.value.worded(flags.flag_name)
    assert "needs 6.58 GiB but GPU:0 has 4.00 GiB free" in worded
    assert "use --replay-device host, or lower --replay-capacity" in worded


def test_a_mirror_in_ram_is_counted_twice(tmp_path, monkeypatch):
    """--replay-device device on a CPU keeps replay and its mirror in RAM: the check that
    refuses a replay before a byte is allocated counts both."""
    from fast_dqn.agent import backend_setup, replay_memory
    monkeypatch.setattr(backend_setup, "accelerator_memory", lambda: None)
    monkeypatch.setattr(replay_memory, "available_memory_bytes", lambda: 10 * 2**30)
    argv = ["--replay-capacity=1000000", f"--logdir={tmp_path / 'r'}"]
    cli.validate_and_resolve(parse(argv, FastConfig))  # 7.1 GB of 10.7 GB: fits once
    with pytest.raises(ConfigError, match="twice: replay and its mirror"):
        cli.validate_and_resolve(parse(argv + ["--replay-device=device"], FastConfig))


def test_a_run_made_before_sampler_groups_existed_resumes_with_one():
    """Its config.json has no "sampler_groups": it played one group, which a resume keeps on
    a GPU too, though a new run's default (0) picks two there."""
    from fast_dqn.run.resume import saved_values
    assert FastConfig().sampler_groups == 0
    assert saved_values({"loop": "fast"}, FastConfig)["sampler_groups"] == 1
    assert saved_values({"loop": "fast", "sampler_groups": 2}, FastConfig)["sampler_groups"] == 2
