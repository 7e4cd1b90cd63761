"""The tests mirror the package, so that a module's tests are found where the module is: each
module of fast_dqn/ has a test module at the mirrored path (fast_dqn/agent/learner.py:
tests/agent/test_learner.py), or is named in COVERED_ELSEWHERE with the test module that
covers it. Beside the layers' folders, tests/ holds only the folders of what crosses them
(faults/, end_to_end/) and benchmarks/'s tests; docs/testing.md describes the layout.

Test modules have unique names and tests/ has no __init__.py: pytest imports each module by
its name, with its folder on sys.path, and no test folder becomes a package that could shadow
a name (tests/ itself is on sys.path)."""

import ast
import os
from collections import Counter

from helpers import ROOT
from package_map import PACKAGE, package_modules

TESTS = os.path.join(ROOT, "tests")
# tests/'s folders that are no folder of the package: runs and faults across the layers, and
# the tests of benchmarks/.
ACROSS_LAYERS = {"faults", "end_to_end", "benchmarks"}

# Modules without a test module of their own, each with the one that tests it. Most are parts
# whose contract is only seen through the module that uses them (the train steps through the
# learner, the checkpoint's files through the checkpoint), or several modules tested together
# (the suite's). A module named here that gets a test module of its own must leave the list.
COVERED_ELSEWHERE = {
    # The package's top level: the command line's entries, the errors, the recorded code.
    "__main__": "tests/tools/test_commands.py",
    "code_version": "tests/tools/test_commands.py",
    "commands": "tests/tools/test_commands.py",
    "errors": "tests/run/test_bad_input.py",
    "evaluate": "tests/tools/test_workflow_tools.py",
    "plot": "tests/tools/test_workflow_tools.py",
    "state_schema": "tests/run/storage/test_checkpoint.py",
    "agent.batch": "tests/agent/test_replay_memory.py",
    "agent.compile_options": "tests/agent/test_update_variants.py",
    "agent.fused_optimizer": "tests/agent/test_update_variants.py",
    "agent.optimizer_defaults": "tests/agent/test_learner.py",
    "agent.replay_gather": "tests/agent/test_fused_updates.py",
    "agent.replay_mirror": "tests/agent/test_fused_updates.py",
    "agent.train_calls": "tests/loops/test_fast_loop.py",
    "agent.train_step_jax": "tests/agent/test_learner.py",
    "agent.train_step_tf": "tests/agent/test_learner.py",
    "envs.ale_game": "tests/envs/test_environment.py",
    "envs.games": "tests/run/settings/test_presets_and_env.py",
    "envs.settings": "tests/envs/test_environment.py",
    "loops.evaluate_then_checkpoint": "tests/loops/test_nature_loop.py",
    "loops.experience": "tests/loops/test_backends.py",
    "loops.fast_loop_group": "tests/run/test_group_training.py",
    "loops.fast_loop_state": "tests/loops/test_fast_loop.py",
    "loops.ray_backend": "tests/loops/test_backends.py",
    "loops.settings": "tests/loops/test_nature_loop.py",
    "run.components": "tests/run/test_training.py",
    "run.run_kinds": "tests/run/test_cli.py",
    "run.logs.tensorboard_log": "tests/tools/test_workflow_tools.py",
    "run.settings.flags": "tests/run/test_cli.py",
    "run.settings.hyperparameters": "tests/run/test_bad_input.py",
    "run.settings.precedence": "tests/run/settings/test_presets_and_env.py",
    "run.settings.presets": "tests/run/settings/test_presets_and_env.py",
    "run.settings.validation": "tests/run/test_bad_input.py",
    "run.storage.array_file": "tests/run/storage/test_checkpoint.py",
    "run.storage.state_tree": "tests/run/storage/test_checkpoint.py",
    "suite.cli": "tests/suite/test_suite.py",
    "suite.game_sets": "tests/suite/test_suite.py",
    "suite.local_runs": "tests/suite/test_suite.py",
    "suite.plan": "tests/suite/test_suite.py",
    "suite.ray_runs": "tests/suite/test_suite.py",
    "suite.table": "tests/suite/test_suite.py",
    "tools.atari_scores": "tests/tools/test_workflow_tools.py",
    "tools.figure_file": "tests/tools/test_plot.py",
    "tools.partial_file": "tests/tools/test_commands.py",
    "tools.run_logs": "tests/tools/test_plot.py",
    "tools.run_scores": "tests/tools/test_aggregate.py",
    "tools.suite_scores": "tests/suite/test_suite.py",
    "tools.tool_exits": "tests/tools/test_evaluate.py",
}


def mirrored(module):
    """'agent.learner' -> 'tests/agent/test_learner.py'."""
    *folders, name = module.split(".")
    return "/".join(["tests", *folders, f"test_{name}.py"])


def all_test_modules():
    """The repository-relative paths of every test module (tests/agent/test_learner.py)."""
    return sorted(os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")
                  for folder, _, files in os.walk(TESTS) for name in files
                  if name.startswith("test_") and name.endswith(".py"))


def exists(path):
    return os.path.isfile(os.path.join(ROOT, path))


def test_the_mirrored_path():
    assert mirrored("agent.learner") == "tests/agent/test_learner.py"
    assert mirrored("run.storage.checkpoint") == "tests/run/storage/test_checkpoint.py"
    assert mirrored("errors") == "tests/test_errors.py"


def test_every_module_has_a_test_module_or_names_the_one_that_covers_it():
    modules = sorted(package_modules())
    assert "agent.learner" in modules and "run.storage.checkpoint" in modules  # the walk
    untested = [f"fast_dqn/{module.replace('.', '/')}.py has no test module: add "
                f"{mirrored(module)}, or name it in COVERED_ELSEWHERE (tests/test_test_map.py) "
                f"with the test module that covers it"
                for module in modules
                if not exists(mirrored(module)) and module not in COVERED_ELSEWHERE]
    assert untested == [], "\n".join(untested)


def test_each_module_named_as_covered_elsewhere_is_and_needs_to_be():
    modules = set(package_modules())
    wrong = []
    for module, where in sorted(COVERED_ELSEWHERE.items()):
        if module not in modules:
            wrong.append(f"{module} is no module of fast_dqn/: drop it from COVERED_ELSEWHERE")
        elif exists(mirrored(module)):
            wrong.append(f"{module} has {mirrored(module)} now: drop it from COVERED_ELSEWHERE")
        elif not exists(where):
            wrong.append(f"{module} is said to be covered by {where}, which does not exist: "
                         f"name the test module that covers it")
    assert wrong == [], "\n".join(wrong)


def test_the_test_folders_are_the_packages_and_the_names_unique():
    folders = {os.path.dirname(path) for path in all_test_modules()}
    layers = {os.path.relpath(folder, PACKAGE).replace(os.sep, "/")
              for folder, _, _ in os.walk(PACKAGE) if "__pycache__" not in folder}
    astray = sorted(folder for folder in folders if folder != "tests"
                    and folder.split("/")[1] not in ACROSS_LAYERS
                    and folder[len("tests/"):] not in layers)
    assert astray == [], f"test folders that are no folder of fast_dqn/: {astray}"
    assert {"tests/agent", "tests/run/storage", "tests/faults"} <= folders
    names = Counter(os.path.basename(path) for path in all_test_modules())
    assert [name for name, count in names.items() if count > 1] == [], \
        "two test modules of one name: pytest imports them by name; rename one"
    assert not [folder for folder, _, files in os.walk(TESTS) if "__init__.py" in files]


def test_no_test_module_imports_another():
    """What test modules share lives in the shared files (helpers.py, package_map.py, the
    fakes): a test module that imports another works only in some collection orders."""
    imports = {}
    for path in all_test_modules():
        for node in ast.walk(ast.parse(open(os.path.join(ROOT, path)).read())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            imports.update({(path, n): n for n in names
                            if any(part.startswith("test_") for part in n.split("."))})
    assert not imports, sorted(imports)
