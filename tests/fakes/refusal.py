"""A test double of the error a grpc stub raises when the service it called refused (grpc's _InactiveRpcError):
its status code and details, nothing else."""

from __future__ import annotations

import grpc


class Refused(grpc.RpcError):
    """What a gRPC stub raises for a refused call (its code and details)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details
