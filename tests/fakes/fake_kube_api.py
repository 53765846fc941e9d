"""A TEST DOUBLE of the Kubernetes API server: just the batch/v1 Job endpoints the kubernetes runner uses.

This is not Kubernetes. It is a small ``http.server.ThreadingHTTPServer`` on 127.0.0.1 (a free
port, served from a thread) that speaks the same JSON over HTTP as the real API server for:

* ``POST   /apis/batch/v1/namespaces/{ns}/jobs``              -> 201 with the stored Job, 409 AlreadyExists
* ``GET    /apis/batch/v1/namespaces/{ns}/jobs/{name}``       -> 200 with the Job, 404 NotFound
* ``GET    /apis/batch/v1/namespaces/{ns}/jobs/{name}/status`` -> the same
* ``DELETE /apis/batch/v1/namespaces/{ns}/jobs/{name}``       -> 200 Status Success (the Job is gone at once), 404

Errors are ``Status`` objects like the real server's. Nothing runs: a Job's status changes only when
the test calls :meth:`FakeKubeApi.set_status`. Every request is recorded (method, path, query,
JSON body) so tests can assert on exactly what the client sent; :meth:`FakeKubeApi.fail_next`
makes the next matching request answer an error (e.g. 403 Forbidden) instead.
"""

from __future__ import annotations

import copy
import dataclasses
import http.server
import json
import re
import threading
import urllib.parse
import uuid
from typing import Any

from rlgpt.http_thread import HTTPThread

_COLLECTION = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs$")
_ITEM = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs/([^/]+)(/status)?$")
_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 409: "AlreadyExists",
            422: "Invalid", 500: "InternalError"}


@dataclasses.dataclass
class Request:
    """One request the double received."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


def status_object(code: int, message: str, reason: str | None = None, **details: Any) -> dict[str, Any]:
    """A ``v1.Status`` failure body, as the API server sends with every error."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason or _REASONS.get(code, "Unknown"), "details": details, "code": code}


class FakeKubeApi(HTTPThread):
    """The test double; use as a context manager (or call :meth:`start`/:meth:`stop`)."""

    poll_interval = 0.02  # stop() waits up to one interval, on every test's teardown

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self._failures: list[tuple[str, str, int, str]] = []
        self._lock = threading.Lock()
        super().__init__(type("Handler", (_Handler,), {"api": self}), name="fake-kube-api")

    # --- test controls -----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """``http://127.0.0.1:<port>``, for ``kubernetes.client.Configuration().host``."""
        return f"http://127.0.0.1:{self.port}"

    def set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Sets a Job's ``status`` (e.g. ``{"succeeded": 1}``), as the Job controller would."""
        with self._lock:
            self.jobs[(namespace, name)]["status"] = copy.deepcopy(status)

    def add_job(self, job: dict[str, Any]) -> None:
        """Stores a Job as if created earlier (by another learner process)."""
        with self._lock:
            self.jobs[(job["metadata"]["namespace"], job["metadata"]["name"])] = self._stored(job)

    def delete_job(self, namespace: str, name: str) -> None:
        """Removes a Job behind the client's back (kubectl delete, the TTL controller)."""
        with self._lock:
            del self.jobs[(namespace, name)]

    def fail_next(self, method: str, code: int, message: str, path_contains: str = "") -> None:
        """The next ``method`` request (whose path contains ``path_contains``) gets this error."""
        with self._lock:
            self._failures.append((method, path_contains, code, message))

    def requests_of(self, method: str) -> list[Request]:
        """The recorded requests with this HTTP method."""
        with self._lock:
            return [r for r in self.requests if r.method == method]

    # --- request handling (called from the server's threads) ---------------------------------------

    @staticmethod
    def _stored(job: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(job)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("resourceVersion", "1")
        meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
        stored.setdefault("status", {})
        return stored

    def handle(self, method: str, raw_path: str, body: Any) -> tuple[int, dict[str, Any]]:
        """Records the request and returns (HTTP status, JSON body)."""
        url = urllib.parse.urlsplit(raw_path)
        with self._lock:
            self.requests.append(Request(method, url.path, urllib.parse.parse_qs(url.query), body))
            for i, (f_method, f_path, code, message) in enumerate(self._failures):
                if f_method == method and f_path in url.path:
                    del self._failures[i]
                    return code, status_object(code, message)
            return self._route(method, url.path, body)

    def _route(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        if match := _COLLECTION.match(path):
            namespace = match.group(1)
            if method != "POST":
                return 405, status_object(405, f"{method} not implemented by the test double")
            name = body["metadata"]["name"]
            if (namespace, name) in self.jobs:
                return 409, status_object(409, f'jobs.batch "{name}" already exists',
                                          name=name, group="batch", kind="jobs")
            job = self._stored(body)
            job["metadata"]["namespace"] = namespace
            self.jobs[(namespace, name)] = job
            return 201, copy.deepcopy(job)
        if match := _ITEM.match(path):
            namespace, name = match.group(1), match.group(2)
            job = self.jobs.get((namespace, name))
            if job is None:
                return 404, status_object(404, f'jobs.batch "{name}" not found', name=name, group="batch",
                                          kind="jobs")
            if method == "GET":
                return 200, copy.deepcopy(job)
            if method == "DELETE" and not match.group(3):
                del self.jobs[(namespace, name)]
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "details": {"name": name, "group": "batch", "kind": "jobs", "uid": job["metadata"]["uid"]}}
            return 405, status_object(405, f"{method} not implemented by the test double")
        return 404, status_object(404, f"the test double serves no {path}")


class _Handler(http.server.BaseHTTPRequestHandler):
    api: FakeKubeApi
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3's pool expects

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        code, payload = self.api.handle(self.command, self.path, body)
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output quiet; requests are recorded instead
