"""NumPy arrays <-> ``rlgpt.v1.Tensor`` without copies beyond the protobuf bytes."""

from __future__ import annotations

import math

import numpy as np

from rlgpt.errors import InvalidArgument
from rlgpt.v1 import common_pb2

_ALLOWED = {"uint8", "int8", "int32", "int64", "float16", "float32", "float64", "bool"}


def to_tensor(array: np.ndarray) -> common_pb2.Tensor:
    """Packs a C-contiguous copy of ``array``."""
    array = np.ascontiguousarray(array)
    return common_pb2.Tensor(dtype=str(array.dtype), shape=list(array.shape), data=array.tobytes())


def from_tensor(tensor: common_pb2.Tensor) -> np.ndarray:
    """Unpacks a tensor (read-only view on the bytes); InvalidArgument when dtype or size disagree."""
    if tensor.dtype not in _ALLOWED:
        raise InvalidArgument(f"tensor dtype {tensor.dtype!r} is not one of {sorted(_ALLOWED)}")
    if any(d < 0 for d in tensor.shape):
        raise InvalidArgument(f"tensor shape {list(tensor.shape)} has a negative dimension")
    dtype = np.dtype(tensor.dtype)
    expected = math.prod(tensor.shape) * dtype.itemsize
    if len(tensor.data) != expected:
        raise InvalidArgument(f"tensor of shape {list(tensor.shape)} and dtype {tensor.dtype} needs "
                              f"{expected} bytes, got {len(tensor.data)}")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(tuple(tensor.shape))
