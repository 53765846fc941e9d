"""The kubernetes runner's API calls against ``fake_kube_api``, a TEST DOUBLE of the API server served over HTTP on
loopback (not a cluster: Jobs never run there, the tests set their status)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import kubernetes.config.kube_config
import pytest
from fakes import fake_kube_api
from k8s_support import JOB_DIR, JOB_ID, NS, SETTINGS, container, rl_config

from rlgpt.errors import Unavailable
from services.learner.jobs import train_command
from services.learner.k8s import KubernetesJobHandle, KubernetesRunner
from services.learner.k8s_manifest import build_job_manifest

# --- the runner against the API-server test double ---------------------------------------------------


@pytest.fixture
def fake() -> Iterator[fake_kube_api.FakeKubeApi]:
    with fake_kube_api.FakeKubeApi() as api:
        yield api


@pytest.fixture
def runner(fake: fake_kube_api.FakeKubeApi) -> Iterator[KubernetesRunner]:
    configuration = kubernetes.client.Configuration()
    configuration.host = fake.host
    configuration.retries = False  # an error is an answer here; no urllib3 retry loops in unit tests
    with kubernetes.client.ApiClient(configuration) as api_client:
        yield KubernetesRunner(SETTINGS, api_client=api_client)


NAME = f"rlgpt-train-{JOB_ID}"


def test_launch_posts_the_manifest_once(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    (post,) = fake.requests_of("POST")
    assert post.path == f"/apis/batch/v1/namespaces/{NS}/jobs"
    assert post.body == build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS)
    assert post.body["metadata"]["namespace"] == NS
    assert container(post.body)["image"] == SETTINGS.k8s_image
    assert container(post.body)["command"] == train_command(JOB_DIR)
    assert isinstance(handle, KubernetesJobHandle)
    assert handle.describe() == f"kubernetes Job {NS}/{NAME}"


def test_poll_follows_the_job_status(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    assert handle.poll() is None
    fake.set_status(NS, NAME, {"active": 1, "startTime": "2024-01-01T00:00:01Z"})
    assert handle.poll() is None
    fake.set_status(NS, NAME, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
    assert handle.poll() == 0
    assert fake.requests_of("GET")[-1].path == f"/apis/batch/v1/namespaces/{NS}/jobs/{NAME}/status"


def test_poll_reports_a_failed_job(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    fake.set_status(NS, NAME, {"failed": 1})
    assert handle.poll() == 1
    fake.set_status(NS, NAME, {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]})
    assert handle.poll() == 1


def test_poll_reports_a_vanished_job_as_failed(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    fake.delete_job(NS, NAME)
    assert handle.poll() == 1


def test_poll_treats_api_errors_as_still_running(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    fake.fail_next("GET", 500, "etcdserver: request timed out")
    assert handle.poll() is None


def test_kill_deletes_in_the_background(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    handle.kill()
    (delete,) = fake.requests_of("DELETE")
    assert delete.path == f"/apis/batch/v1/namespaces/{NS}/jobs/{NAME}"
    sent = {**(delete.body or {}), **{k: v[0] for k, v in delete.query.items()}}
    assert sent["propagationPolicy"] == "Background"
    assert (NS, NAME) not in fake.jobs
    handle.kill()  # already gone: a 404, ignored
    assert len(fake.requests_of("DELETE")) == 2


def test_reattach(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    fake.add_job(build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS))
    handle = runner.reattach(JOB_ID, JOB_DIR)
    assert handle is not None and handle.describe() == f"kubernetes Job {NS}/{NAME}"
    assert handle.poll() is None
    assert runner.reattach("not-launched", Path("/runs/jobs/not-launched")) is None
    assert [r.method for r in fake.requests] == ["GET", "GET", "GET"]


def test_conflict_adopts_a_running_job(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    fake.add_job(build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS))
    uid = fake.jobs[(NS, NAME)]["metadata"]["uid"]
    fake.set_status(NS, NAME, {"active": 1})
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    assert handle.describe() == f"kubernetes Job {NS}/{NAME}"
    assert fake.jobs[(NS, NAME)]["metadata"]["uid"] == uid  # the same Job, not a new one
    assert len(fake.requests_of("POST")) == 1 and not fake.requests_of("DELETE")
    assert handle.poll() is None


def test_conflict_replaces_a_finished_job(fake: fake_kube_api.FakeKubeApi, runner: KubernetesRunner) -> None:
    """A resumed job whose earlier Job still lingers (TTL) must not inherit that Job's exit status."""
    fake.add_job(build_job_manifest(JOB_ID, JOB_DIR, rl_config(), SETTINGS))
    fake.set_status(NS, NAME, {"succeeded": 1})
    handle = runner.launch(JOB_ID, JOB_DIR, rl_config())
    assert [r.method for r in fake.requests] == ["POST", "GET", "DELETE", "POST"]
    assert handle.poll() is None


def test_forbidden_launch_is_unavailable_naming_the_namespace(fake: fake_kube_api.FakeKubeApi,
                                                              runner: KubernetesRunner) -> None:
    fake.fail_next("POST", 403, f'jobs.batch is forbidden: User "system:serviceaccount:{NS}:learner" cannot '
                                f'create resource "jobs" in API group "batch" in the namespace "{NS}"')
    with pytest.raises(Unavailable) as caught:
        runner.launch(JOB_ID, JOB_DIR, rl_config())
    assert NS in str(caught.value) and "403" in str(caught.value)
    assert not fake.jobs


def test_unreachable_api_server_is_unavailable() -> None:
    with fake_kube_api.FakeKubeApi() as api:
        host = api.host  # a port that was free a moment ago and is closed now
    configuration = kubernetes.client.Configuration()
    configuration.host = host
    configuration.retries = False
    with kubernetes.client.ApiClient(configuration) as api_client:
        runner = KubernetesRunner(SETTINGS, api_client=api_client)
        with pytest.raises(Unavailable, match=NS):
            runner.launch(JOB_ID, JOB_DIR, rl_config())


def test_runner_loads_the_kube_config(fake: fake_kube_api.FakeKubeApi, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an api_client the runner reads ~/.kube/config (here: a file pointing at the test double)."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(f"""
apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{fake.host}"}}}}]
users: [{{name: tester, user: {{token: not-a-secret}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: tester, namespace: {NS}}}}}]
current-context: fake
""")
    # The loader reads $KUBECONFIG once, at import; its default location is what counts now.
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    default_host = kubernetes.client.Configuration.get_default_copy().host
    runner = KubernetesRunner(SETTINGS)
    assert runner.reattach(JOB_ID, JOB_DIR) is None
    assert [r.path for r in fake.requests] == [f"/apis/batch/v1/namespaces/{NS}/jobs/{NAME}"]
    # The runner configured its own client, not the process-wide default one.
    assert kubernetes.client.Configuration.get_default_copy().host == default_host


