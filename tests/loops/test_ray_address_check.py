"""--ray-address: the up-front check tells a Ray head (a gRPC server) from anything else that
listens there, in seconds, where ray.init would retry for minutes and end in a traceback."""

import socket
import threading
import time

import pytest

from fast_dqn.errors import ConfigError

pytest.importorskip("ray")
from fast_dqn.loops.ray_cluster import check_reachable  # noqa: E402  (after the skip)

SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty HTTP/2 SETTINGS frame


def answer_like_http1(conn):
    conn.recv(1024)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def say_nothing(conn):
    conn.recv(1024)
    conn.recv(1024)  # until the client gives up and closes


def hang_up(conn):
    pass


def answer_like_grpc(conn):
    conn.recv(1024)
    conn.sendall(SETTINGS)
    conn.recv(1024)


@pytest.fixture
def server():
    """start(behaviour) -> port of a one-connection TCP server that treats its client so.

    It listens on every interface: check_reachable, like ray.init, replaces 127.0.0.1 by
    this machine's network IP."""
    listeners = []

    def start(behaviour):
        listener = socket.create_server(("0.0.0.0", 0))
        listeners.append(listener)

        def serve():
            with listener.accept()[0] as conn:
                conn.settimeout(10)
                try:
                    behaviour(conn)
                except OSError:
                    pass

        threading.Thread(target=serve, daemon=True).start()
        return listener.getsockname()[1]

    yield start
    for listener in listeners:
        listener.close()


@pytest.mark.parametrize("behaviour,words", [
    (answer_like_http1, "it answered 'HTTP/1.1 400 Bad Request"),
    (say_nothing, "it said nothing in 2 s"),
    (hang_up, "it closed the connection"),
])
def test_something_that_is_not_ray_is_refused_in_one_line(server, behaviour, words):
    port = server(behaviour)
    start = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        # 2 s, not less: the fake server is a thread of this process, and on a loaded CI
        # machine it may take that long to answer.
        check_reachable(f"127.0.0.1:{port}", seconds=2)
    assert time.monotonic() - start < 15  # a bounded wait, not a hang
    message = str(refused.value)
    assert message.startswith("ray_address: what answers at ") and "\n" not in message
    assert f":{port} (from '127.0.0.1:{port}') is not a Ray cluster: " in message
    assert words in message and "give the address `ray start --head` printed" in message


def test_a_grpc_server_passes(server):
    port = server(answer_like_grpc)
    check_reachable(f"127.0.0.1:{port}", seconds=5)


def test_a_closed_port_still_says_nothing_answers():
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
    with pytest.raises(ConfigError, match="nothing answers at .*give the address"):
        check_reachable(f"127.0.0.1:{port}", seconds=0.5)
