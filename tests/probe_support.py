"""A probe of a server under load (issue 38): health asked every 0.25 s and Describe every 2 s over a channel of its
own, the slowest answers and the failures kept, so a test can tell that health and Describe always got a thread."""

from __future__ import annotations

import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc
from services.env_server.servicer import SERVICE_NAME


class Probe(threading.Thread):
    """Asks health every 0.25 s (and Describe every 2 s) until stopped; keeps the slowest answers and failures."""

    def __init__(self, target: str):
        super().__init__(daemon=True, name="probe")
        self.channel = create_channel(target)
        self.stop = threading.Event()
        self.health_seconds: list[float] = []
        self.describe_seconds: list[float] = []
        self.failures: list[str] = []

    def run(self) -> None:
        health = health_pb2_grpc.HealthStub(self.channel)
        env = env_pb2_grpc.EnvServiceStub(self.channel)
        asked = 0
        while not self.stop.wait(0.25):
            start = time.perf_counter()
            try:
                health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
                self.health_seconds.append(time.perf_counter() - start)
                asked += 1
                if asked % 8 == 1:
                    start = time.perf_counter()
                    env.Describe(env_pb2.DescribeRequest(), timeout=10)
                    self.describe_seconds.append(time.perf_counter() - start)
            except grpc.RpcError as exc:
                self.failures.append(f"{exc.code().name} after {time.perf_counter() - start:.1f} s")
        self.channel.close()
