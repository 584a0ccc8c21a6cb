"""The graph binding's tensors (nnkern._C.GraphConstant, the compiled plans' inputs and outputs): NumPy dtypes map
to graph dtypes by kind and size and back. No onnx needed, so these run wherever the extension does (under qemu
too, built against the distribution's pybind11)."""
import numpy as np
import pytest

import nnkern


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.uint8, np.int8, np.uint16, np.int16,
                                   np.uint32, np.int32, np.uint64, np.int64, np.bool_])
def test_graph_tensors_keep_their_numpy_dtype(dtype):
    """The binding maps NumPy dtypes to graph dtypes by kind and size, and back: every supported one round-trips."""
    x = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    got = nnkern._C.GraphConstant(x).numpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x)


try:
    import ml_dtypes
    REGISTERED = [ml_dtypes.bfloat16, ml_dtypes.float8_e5m2]  # registered types of kinds "V" and "f"
except ImportError:
    REGISTERED = []


@pytest.mark.parametrize("dtype", [">f4", ">i8", np.complex64, np.longdouble, "U3", object, "M8[s]",
                                   [("a", np.float32)]] + REGISTERED)
def test_other_numpy_dtypes_are_not_graph_tensors(dtype):
    with pytest.raises(TypeError, match="cannot be graph tensors"):
        nnkern._C.GraphConstant(np.zeros((2,), dtype))


def test_integers_of_another_name_are_the_same_graph_dtype():
    """np.longlong is int64's bytes under another type number on Linux: accepted as int64 (kind and size)."""
    x = np.arange(5, dtype=np.longlong)
    np.testing.assert_array_equal(nnkern._C.GraphConstant(x).numpy(), x.astype(np.int64))
