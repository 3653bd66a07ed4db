"""What the compose and Testcontainers tests need from podman, set up once: a containers.conf
with this sandbox's runtime (runc: its hybrid cgroups stop crun) and open-file limits (podman's
default is above what an unprivileged sandbox may set), and for Testcontainers, which speaks
Docker's API, podman's Docker-compatible API service on a socket of its own."""

import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

RUNTIME = os.environ.get("PODMAN_RUNTIME", "runc")


def _nofile():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)


@pytest.fixture(scope="session")
def podman_env():
    """The environment podman, podman-compose and Testcontainers run in."""
    work = Path(tempfile.mkdtemp(prefix="sqsim-podman-"))
    conf = work / "containers.conf"
    n = _nofile()
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={n}:{n}", "nproc=4096:4096"]\n'
        "[engine]\n"
        f'runtime = "{RUNTIME}"\n'
    )
    env = dict(os.environ, CONTAINERS_CONF=str(conf))
    yield env
    shutil.rmtree(work, ignore_errors=True)


# Testcontainers reads its settings when it is imported (by the test modules, after this
# file), so they are set here. Its reaper (Ryuk) is an image pulled from a registry, which
# this machine cannot reach: the test's `with` block removes its container instead. This
# machine is itself a container (/.dockerenv), which would make Testcontainers look for the
# container through a gateway address; the ports are published on this machine's loopback.
API_SOCKET = Path(tempfile.mkdtemp(prefix="sqsim-docker-api-")) / "podman.sock"
os.environ["DOCKER_HOST"] = f"unix://{API_SOCKET}"
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
os.environ["TESTCONTAINERS_CONNECTION_MODE"] = "docker_host"


@pytest.fixture(scope="session")
def docker_api(podman_env):
    """podman's Docker API on the socket DOCKER_HOST names, for Testcontainers."""
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{API_SOCKET}"], env=podman_env
    )
    deadline = time.monotonic() + 20
    while not API_SOCKET.exists():
        assert service.poll() is None, "podman system service exited"
        assert time.monotonic() < deadline, "podman's API socket did not appear"
        time.sleep(0.1)
    yield
    service.terminate()
    service.wait(10)
