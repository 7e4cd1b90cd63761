"""The Ray cluster itself: start a private one, join one, check an address before joining.

The Ray backend connects through these, and so do the flags' checks
(fast_dqn.run.settings.validation) and the suite's Ray runs, which must not import the backend
(it imports ray and defines its actors at import time). This module imports ray only inside
the functions that talk to a cluster, so a run that never uses Ray never loads it.
"""

import os
import secrets
import signal
import time
import warnings

from fast_dqn.agent.backend_setup import keras_backend

AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def package_dir():
    """The whole fast_dqn package, which Ray ships to machines that joined the cluster.

    Returns:
        The package's directory, an absolute path.
    """
    import fast_dqn
    return os.path.dirname(os.path.abspath(fast_dqn.__file__))


def connect(settings, log):
    """Start or join the cluster unless already connected; True when this process connected.

    Such a process must disconnect at the end, which also stops a cluster it started. Ray's
    driver set-up replaces the SIGTERM handler with one that exits at once; the run's own
    handler (checkpoint, then exit) is put back.
    """
    import ray
    if ray.is_initialized():  # a caller (a test, a notebook) already chose the cluster
        return False
    handler = signal.getsignal(signal.SIGTERM)
    # Machines that joined the cluster get this package from the driver; they need only the
    # requirements installed. Their actors use the driver's Keras backend, whatever their
    # own environment says.
    runtime_env = {"py_modules": [package_dir()],
                   "env_vars": {"KERAS_BACKEND": keras_backend()}}
    try:
        with warnings.catch_warnings():
            # JAX warns at every fork once it runs; Ray's start-up forks only to exec its
            # processes, which inherit none of JAX's threads.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                    category=RuntimeWarning)
            if settings.address:  # checked by check_reachable when the flags were validated
                ray.init(address=settings.address, runtime_env=runtime_env,
                         log_to_driver=True, logging_level="WARNING")
            else:
                cores = os.cpu_count() or 1
                if settings.num_samplers > cores:
                    log(f"{settings.num_samplers} sampler actors share {cores} cores")
                start_private_cluster(max(cores, settings.num_samplers),
                                      settings.object_store_mb, runtime_env=runtime_env)
    finally:
        signal.signal(signal.SIGTERM, handler)
    return True


# The HTTP/2 client connection preface, then an empty SETTINGS frame: what a gRPC client
# sends first (RFC 9113, section 3.4). Ray's GCS, like any gRPC server, answers with a
# SETTINGS frame of its own.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_FRAME = 0x04


def probe_grpc(host, port, seconds=5.0):
    """None when a gRPC server answers at host:port within `seconds`, else what answered instead.

    It raises OSError when nothing accepts the connection. Checked (2026-11-23) against Ray
    2.60: the GCS of a private cluster with token auth and that of `ray start --head
    --port=6391` both answered with a SETTINGS frame within 25 ms. Any gRPC server passes, a
    raylet's port too: the point is to refuse what is surely no Ray.
    """
    import socket
    deadline = time.monotonic() + seconds
    with socket.create_connection((host, port), timeout=seconds) as conn:
        answer = b""
        try:
            conn.sendall(HTTP2_PREFACE)
            while len(answer) < 9:
                conn.settimeout(max(deadline - time.monotonic(), 1e-3))
                chunk = conn.recv(64)  # more than a frame header: the line to quote
                if not chunk:
                    break
                answer += chunk
        except socket.timeout:
            if not answer:
                return f"it said nothing in {seconds:g} s"
        except OSError as error:
            if not answer:
                return f"it closed the connection ({error.strerror or error})"
    if len(answer) >= 9 and answer[3] == SETTINGS_FRAME:
        return None
    if not answer:
        return "it closed the connection without a word"
    # The first line of what it said, printable, for the user to recognise (an HTTP server).
    line = answer.decode("latin-1").splitlines()[0]
    text = "".join(c if c.isprintable() else " " for c in line).strip()
    return f"it answered {text[:40]!r}" if text else f"it answered 0x{answer[:9].hex()}"


def check_reachable(address, seconds=5.0):
    """A clear error for a cluster that is not there: ray.init would retry for many minutes.

    It checks the address Ray will really use (Ray replaces 127.0.0.1 and localhost by this
    machine's routable IP, where a head started with --node-ip-address=127.0.0.1 does not
    listen), and that the GCS answers as a gRPC server does, not only accepts connections.

    Args:
        address: the cluster's address as given (--ray-address), host:port or 'local'.
        seconds: how long to wait for the cluster's answer, in seconds.

    Raises:
        ConfigError: the address cannot be parsed, nothing answers there, or what answers is
            not a Ray cluster; the message says what to give instead.
    """
    import socket

    from ray._private.services import canonicalize_bootstrap_address

    from fast_dqn.errors import ConfigError
    try:
        target = canonicalize_bootstrap_address(address)
    except (ConnectionError, ValueError) as error:
        raise ConfigError("ray_address", f"{address!r}: {error}; start the head with "
                          "`ray start --head`, or drop ${ray_address} for a private cluster")
    if target is None:  # 'local': ray.init starts a cluster itself, there is none to check
        return
    host, _, port = target.rpartition(":")
    host, port = host.strip("[]"), int(port)
    try:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            # Ray's own test of the variable. Its GCS then speaks TLS first, with certificates
            # a probe does not hold: only the connection can be checked.
            socket.create_connection((host, port), timeout=seconds).close()
            problem = None
        else:
            problem = probe_grpc(host, port, seconds)
    except OSError as error:
        raise ConfigError("ray_address", f"nothing answers at {target} (from {address!r}: "
                          f"{error}); give the address `ray start --head` printed, which is "
                          "this machine's network IP, not 127.0.0.1")
    if problem:
        raise ConfigError("ray_address", f"what answers at {target} (from {address!r}) is not "
                          f"a Ray cluster: {problem}; give the address `ray start --head` "
                          "printed (its GCS port, 6379 unless --port was given)")


def private_auth_token():
    """Token auth for a cluster that only this process and its children use.

    Left alone, a new local cluster writes a token to ~/.ray/auth_token, and that file then
    switches token auth on for every later `ray start` on the machine. A token kept in the
    environment protects the cluster as well and leaves nothing behind. A user's own RAY_AUTH_*
    settings win.
    """
    if not any(name in os.environ for name in AUTH_VARIABLES):
        # With the mode unset, ray.init switches token auth on itself, and refreshes the
        # settings it has already read in this process.
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def start_private_cluster(num_cpus, object_store_mb, num_gpus=0, **init_kwargs):
    """Start a new single-machine cluster on loopback, never joining a stray running one.

    Args:
        num_cpus: the CPU cores the cluster offers its actors.
        object_store_mb: the object store's size, in MiB.
        num_gpus: the GPUs the cluster offers its actors.
        **init_kwargs: passed on to ray.init (a runtime_env, for one).
    """
    import ray
    private_auth_token()
    ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus,
             object_store_memory=object_store_mb * 2**20, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=True, logging_level="WARNING",
             **init_kwargs)
