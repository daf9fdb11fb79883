"""What the tests that start servers share: a free port on 127.0.0.1, and stopping a process they started."""

from __future__ import annotations

import socket
import subprocess

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stops a process the test started: terminate, then kill if it does not exit in `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
