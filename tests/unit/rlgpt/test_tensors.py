import numpy as np
import pytest

from rlgpt.errors import InvalidArgument
from rlgpt.tensors import from_tensor, to_tensor
from rlgpt.v1 import common_pb2


def test_round_trip_keeps_dtype_and_shape() -> None:
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2]  # non-contiguous on purpose
    back = from_tensor(to_tensor(array))
    assert back.dtype == np.float32 and back.shape == (2, 2, 4)
    assert np.array_equal(back, array)


@pytest.mark.parametrize("tensor", [
    common_pb2.Tensor(dtype="object", shape=[1], data=b"x"),
    common_pb2.Tensor(dtype="uint8", shape=[2, 2], data=b"abc"),
    common_pb2.Tensor(dtype="uint8", shape=[-1], data=b""),
])
def test_bad_tensors_are_invalid_argument(tensor: common_pb2.Tensor) -> None:
    with pytest.raises(InvalidArgument):
        from_tensor(tensor)
