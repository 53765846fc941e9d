"""The container images, for real (`make test-e2e`): `podman play kube` of the kind overlay, then the smoke run.

Both need the CPU images built by `make images-local` (podman, a debootstrap base, no registry). A missing podman
or image fails the test with the command that fixes it; it never skips, so a green e2e run means the images ran.
Each script tears down everything it started, also when it fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]
ROOT = Path(__file__).resolve().parents[2]
IMAGES = [f"rlgpt/{name}:dev" for name in ("env-server", "learner", "planner", "critic", "llm")]


@pytest.fixture(scope="module")
def local_images() -> list[str]:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: `make images-local` installs it and builds the images")
    missing = [image for image in IMAGES
               if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0]
    if missing:
        pytest.fail(f"images not built: {', '.join(missing)}; build them with `make images-local`")
    return IMAGES


def _run(script: str, timeout: float) -> str:
    proc = subprocess.run([str(ROOT / "deploy" / "scripts" / script)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} exited with {proc.returncode}:\n{output[-6000:]}"
    return output


def _no_leftovers(prefix: str) -> None:
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert not [n for n in names if n.startswith(prefix)], f"containers left running: {names}"


def test_play_kube_serves_every_workload(local_images: list[str]) -> None:
    output = _run("play-kube.sh", timeout=900)
    assert "play-kube passed" in output
    for name in ("env-server", "learner", "planner", "critic", "llm"):
        assert f"{name} serving at" in output, output[-4000:]
    for name in ("env-server", "learner", "planner", "critic"):
        _no_leftovers(f"{name}-pod")


def test_smoke_run_against_the_containers(local_images: list[str]) -> None:
    output = _run("smoke-images.sh", timeout=2100)
    assert "smoke-images passed" in output and "report:" in output
    for name in ("planner", "critic", "learner", "env", "llm"):
        assert re.search(rf"podman stop {name}: [0-9.]+ s, exit code 0", output), output[-4000:]
    _no_leftovers("rlgpt-smoke")
