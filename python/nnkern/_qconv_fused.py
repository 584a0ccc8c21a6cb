"""QConv2d's fused output stages (seeds I14, I16; C++ in ops/qconv/stage.h): global average pooling and pixel
shuffle done as the tiles are stored. Here: the arguments' checks, the weights' channel order for the shuffle,
the result's shape and the call."""
from __future__ import annotations

import numpy as np

from ._quant_params import RANGE, int_scalar, positive_scale

POOLS = ("global_avg",)
_POOL_DTYPES = (np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int8))
_8BIT = (np.dtype(np.uint8), np.dtype(np.int8))


class FusedStage:
    """What a QConv2d does after its output stage: nothing (kind None), "pool" or "shuffle"."""

    def __init__(self, OC, groups, odt, output_scale, output_zero_point, residual_scale, pool, pool_dtype,
                 pool_scale, pool_zero_point, pixel_shuffle):
        self.kind, self.r = None, None
        self.pool, self.pool_dtype, self.pool_scale, self.pool_zero_point = None, np.dtype(np.float32), None, None
        if pool is not None and not isinstance(pool, str):
            raise TypeError(f"pool must be None or a str, one of {POOLS}, got {type(pool).__name__}")
        if pool is not None and pool not in POOLS:
            raise ValueError(f"pool must be None or one of {POOLS}, got {pool!r}")
        if pixel_shuffle is not None:
            r = int_scalar(pixel_shuffle, "pixel_shuffle")
            if r < 1:
                raise ValueError(f"pixel_shuffle must be a positive int, got {r}")
            if OC % (r * r):
                raise ValueError(f"pixel_shuffle={r}: out_channels {OC} is not divisible by r*r = {r * r}")
            self.kind, self.r = "shuffle", r
        if pool is not None:
            if self.kind:
                raise ValueError("pool and pixel_shuffle cannot both be fused into one QConv2d")
            self.kind, self.pool = "pool", pool
            self._pool_args(odt, output_scale, output_zero_point, pool_dtype, pool_scale, pool_zero_point)
        elif pool_scale is not None or pool_zero_point is not None or np.dtype(pool_dtype) != np.float32:
            raise ValueError("pool_dtype, pool_scale and pool_zero_point go with pool=")
        if self.kind and residual_scale is not None:
            raise ValueError(f"a residual cannot be fused together with {'pool' if self.pool else 'pixel_shuffle'}")
        # The shuffle's channel order in the packed weights: (i, j, c) for groups == 1, so that the r * C
        # channels a pixel sends to one output row are adjacent (a tile is copied in runs); grouped layers
        # keep torch's order c * r * r + i * r + j (their channels cannot move across groups).
        self.runs = self.kind == "shuffle" and groups == 1 and self.r > 1
        self._odt = odt
        self._out_q = (float(output_zero_point), float(output_scale)) if odt in _8BIT else (0.0, 1.0)

    def _pool_args(self, odt, output_scale, output_zero_point, pool_dtype, pool_scale, pool_zero_point):
        try:
            pdt = np.dtype(pool_dtype)
        except TypeError:
            pdt = None
        if pdt not in _POOL_DTYPES:
            raise TypeError(f"pool_dtype must be float32, uint8 or int8, got {pool_dtype!r}")
        self.pool_dtype = pdt
        if pdt == np.float32:
            if pool_scale is not None or pool_zero_point is not None:
                raise ValueError("pool_scale / pool_zero_point are only for uint8 / int8 pool_dtype")
            return
        if odt == np.int32:
            raise ValueError("int32 output (the accumulators) pools to float32 only")
        if pool_scale is None:
            if odt not in _8BIT:
                raise ValueError(f"pool_dtype {pdt} after {odt} output needs pool_scale")
            pool_scale = output_scale
        zp = pool_zero_point
        if zp is None:
            zp = output_zero_point if odt in _8BIT else 0
        self.pool_scale = float(positive_scale(pool_scale, "pool_scale"))
        zp = int_scalar(zp, "pool_zero_point")
        lo, hi = RANGE[pdt]
        if not lo <= zp <= hi:
            raise ValueError(f"pool_zero_point {zp} is outside the range of {pdt}")
        self.pool_zero_point = zp

    def permutation(self, OC):
        """The packed channel order (perm[packed] = torch's channel), or None for torch's own."""
        if not self.runs:
            return None
        r, C = self.r, OC // (self.r * self.r)
        i, j, c = np.meshgrid(np.arange(r), np.arange(r), np.arange(C), indexing="ij")
        return (c * r * r + i * r + j).reshape(-1)

    def result_shape(self, conv_shape):
        N, OH, OW, OC = conv_shape
        if self.kind == "pool":
            return (N, OC)
        return (N, OH * self.r, OW * self.r, OC // (self.r * self.r))

    def result_dtype(self):
        return self.pool_dtype if self.kind == "pool" else self._odt

    def run(self, packed, x, target, algorithm, kernel):
        if self.kind == "shuffle":
            return packed.run_shuffled(x, target, algorithm, kernel, self.r, self.runs)
        zero, scale = self._out_q
        if self.pool_dtype == np.float32:
            return packed.run_pooled(x, target, algorithm, kernel, zero, scale, 1.0, 0.0, 0.0, 0.0)
        lo, hi = RANGE[self.pool_dtype]
        return packed.run_pooled(x, target, algorithm, kernel, zero, scale, self.pool_scale,
                                 float(self.pool_zero_point), float(lo), float(hi))

    def repr_suffix(self):
        if self.kind == "pool":
            return f", pool={self.pool!r}, pool_dtype={self.pool_dtype.name}"
        return f", pixel_shuffle={self.r}" if self.kind else ""

    def state(self):
        """The constructor arguments (pickling)."""
        return {"pool": self.pool, "pool_dtype": self.pool_dtype, "pool_scale": self.pool_scale,
                "pool_zero_point": self.pool_zero_point, "pixel_shuffle": self.r}

