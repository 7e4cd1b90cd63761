"""The backend's start-up: TensorFlow's C++ noise is dropped from file descriptor 2, anything
else kept."""

import os

from fast_dqn.agent.backend_setup import without_start_up_noise


def test_start_up_noise_is_dropped_and_other_lines_are_kept(capfd):
    noise = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1795365163.210174   20661 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.\n"
        "E0000 00:00:1795365270.145349   21146 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
        "I0000 00:00:1795365268.819121   21146 port.cc:153] oneDNN custom operations are on.\n")
    with without_start_up_noise():
        os.write(2, noise.encode())
        os.write(2, b"E0000 something else went wrong in TensorFlow\n")
    err = capfd.readouterr().err
    assert err == "E0000 something else went wrong in TensorFlow\n"


def test_the_descriptor_is_given_back_even_after_an_error(capfd):
    try:
        with without_start_up_noise():
            raise RuntimeError("import failed")
    except RuntimeError:
        pass
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
