"""Single-layer LSTM with torch.nn.LSTM's semantics, weights packed once (seeds I17, I18/I19, I20).

Per call, the input projection of the whole sequence is one GEMM; each step is one GEMM of the running
h rows against W_hh whose post-op applies the gate activations and the cell update to each block of
hidden units right after its gate tiles are computed (in L1), writing h and c directly.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _C, _precision
from ._arrays import ArrayIn, F32, as_array, as_bool, c_aligned, read_only_copy, require_array, require_ndim
from .activations import ACTIVATION_METHODS

__all__ = ["LSTM", "LSTMOutput"]


class LSTMOutput(tuple):
    """``(output, (h_n, c_n))``, unpacked like torch.nn.LSTM's result, plus the call's dynamic-batch
    accounting (seed I20), counted in cell updates (one sequence advanced by one step):

    steps_useful            sum of the sequence lengths: the updates the result needs.
    steps_computed          the updates this call computed: the sequences are sorted by length and each
                            step runs only those still going, so this equals steps_useful.
    steps_padded            batch x the longest length: what running the padded batch computes.
    wasted_fraction         (steps_computed - steps_useful) / steps_useful (0.0 when nothing is useful).
    static_wasted_fraction  (steps_padded - steps_useful) / steps_useful: the waste of the padded batch
                            (the seed's table: "Static (TF)" wastes 32% at batch 2, 115% at batch 16).
    """

    def __new__(cls, output, h_n, c_n, useful, computed, padded):
        self = super().__new__(cls, (output, (h_n, c_n)))
        self.output, self.h_n, self.c_n = output, h_n, c_n
        self.steps_useful, self.steps_computed, self.steps_padded = useful, computed, padded
        self.wasted_fraction = (computed - useful) / useful if useful else 0.0
        self.static_wasted_fraction = (padded - useful) / useful if useful else 0.0
        return self

    def __getnewargs__(self):
        return (self.output, self.h_n, self.c_n, self.steps_useful, self.steps_computed, self.steps_padded)


class LSTM:
    """One LSTM layer, ``torch.nn.LSTM(input_size, hidden_size, num_layers=1)`` for inference.

    w_ih: float32 (4H, input_size), w_hh: float32 (4H, H), b_ih, b_hh: float32 (4H,) or None (zeros);
    gates in torch's order i, f, g, o (``weight_ih_l0`` etc.). The weights are copied and packed once
    for the micro-kernel dispatched at construction (under another ISA cap later, each call repacks).
    batch_first: x and output are (batch, seq, feature) instead of (seq, batch, feature).
    activation: "accurate" (default), "scalef" or "minimax": the sigmoid/tanh kernels of
    :mod:`nnkern.activations`, trading accuracy for speed (bounds below).
    precision: the layer's float32 precision (:func:`nnkern.set_float32_precision`), or None: the process-wide one
    at each call. At "medium" the input projection x W_ih^T rounds x and W_ih to bf16 and sums their products in
    float32 (:func:`nnkern.matmul`'s bf16 products, W_ih packed once on first use); the recurrent product h W_hh^T
    stays float32 (a few rows per step, and its rounding would compound over the steps), and so does
    :meth:`precompute_embeddings`' table.

    Call: ``output, (h_n, c_n) = lstm(x, (h0, c0), lengths=None)`` (also ``h0=``, ``c0=``); see
    :meth:`__call__`. Safe to call from several threads at once; results are bit-identical for any
    thread count, and a sequence's result does not depend on the batch it is computed in.

    Error bound, per step (from the state the step starts from), with eps = 2**-24, K = input_size + H,
    S = |x| |W_ih|^T + |h| |W_hh|^T + |b_ih| + |b_hh| per gate and es, et the sigmoid/tanh bounds of
    the activation (``accurate`` 2.5e-7 / 5e-7, ``scalef`` 6e-4 / 1.2e-3, ``minimax`` 3e-4 / 6e-4):
      gate pre-activation  ez = (2K + 6) eps S
      i, f, o              ez / 4 + es          g: ez + et
      c'                   |c| e_f + |g| e_i + |i| e_g + 2 eps (|f c| + |i g|)
      h'                   |tanh c'| e_o + |o| (e_c' + et) + eps |h'|
    to first order. Over a sequence, each step's error is carried into the next one by the network's
    own dynamics (a contracting LSTM keeps it near the per-step bound; no a-priori bound holds in
    general). NaN or Inf in an input propagate to the rows and steps that depend on it.
    """

    def __init__(self, w_ih: ArrayIn, w_hh: ArrayIn, b_ih: ArrayIn | None = None, b_hh: ArrayIn | None = None,
                 batch_first: bool = False, activation: str = "accurate", precision: str | None = None) -> None:
        self._precision = _precision.check_precision(precision, allow_none=True)
        w_ih = require_array(w_ih, "w_ih", F32)
        w_hh = require_array(w_hh, "w_hh", F32)
        require_ndim(w_ih, "w_ih", (2,))
        require_ndim(w_hh, "w_hh", (2,))
        if w_ih.shape[0] % 4:
            raise ValueError(f"w_ih must have 4 * hidden_size rows (gates i, f, g, o), got shape {w_ih.shape}")
        H = w_ih.shape[0] // 4
        if w_hh.shape != (4 * H, H):
            raise ValueError(f"w_hh must have shape {(4 * H, H)} for w_ih of shape {w_ih.shape}, got {w_hh.shape}")
        bias = None
        biases = []
        for b, name in ((b_ih, "b_ih"), (b_hh, "b_hh")):
            if b is None:
                biases.append(None)
                continue
            b = require_array(b, name, F32)
            if b.shape != (4 * H,):
                raise ValueError(f"{name} must have shape ({4 * H},), got {b.shape}")
            biases.append(read_only_copy(b))
            bias = b.copy() if bias is None else bias + b  # float32, one rounding
        if not isinstance(activation, str) or activation not in ACTIVATION_METHODS:
            raise ValueError(f"activation must be one of {ACTIVATION_METHODS}, got {activation!r}")
        self._batch_first = as_bool(batch_first, "batch_first")
        self._activation = activation
        # Read-only copies for the attributes and pickling (the packed ones are opaque).
        self._w_ih, self._w_hh = read_only_copy(w_ih), read_only_copy(w_hh)
        self._b_ih, self._b_hh = biases
        self._embedding_table = None
        # The C++ op copies and packs the weights and holds every size a call uses (input_size and
        # hidden_size below read it): no attribute change can make a call go out of bounds.
        self._op = _C.Lstm(c_aligned(w_ih), c_aligned(w_hh), None if bias is None else c_aligned(bias))

    input_size = property(lambda self: self._op.input_size, doc="I, the features of each input step")
    hidden_size = property(lambda self: self._op.hidden_size, doc="H, the hidden (and output) features")
    batch_first = property(lambda self: self._batch_first, doc="x and output are (batch, seq, feature)")
    activation = property(lambda self: self._activation, doc="the sigmoid/tanh method: accurate, scalef, minimax")
    precision = property(lambda self: self._precision, doc="the layer's float32 precision, or None")
    w_ih = property(lambda self: self._w_ih, doc="float32 (4H, input_size), gates i, f, g, o; read-only")
    w_hh = property(lambda self: self._w_hh, doc="float32 (4H, H), read-only")
    b_ih = property(lambda self: self._b_ih, doc="float32 (4H,) or None, read-only")
    b_hh = property(lambda self: self._b_hh, doc="float32 (4H,) or None, read-only")

    @classmethod
    def from_torch(cls, module: Any, activation: str = "accurate") -> LSTM:
        """The same layer as a ``torch.nn.LSTM`` with one layer, one direction and no projection.
        Any other module (a GRU or RNN included) raises TypeError."""
        from ._torch import float32_array, require_module
        what = "LSTM.from_torch"
        mode = getattr(module, "mode", None)  # torch.nn.RNNBase: "LSTM", "GRU", "RNN_TANH", "RNN_RELU"
        if mode in ("GRU", "RNN_TANH", "RNN_RELU"):
            raise TypeError(f"{what} takes a torch.nn.LSTM, got {'a GRU' if mode == 'GRU' else 'an RNN'} "
                            f"({type(module).__name__}): its gates and weight shapes differ from an LSTM's")
        require_module(module, "LSTM", what)
        if module.num_layers != 1 or module.bidirectional or getattr(module, "proj_size", 0):
            raise ValueError("only single-layer, unidirectional LSTMs without proj_size are supported")

        def get(name):
            return float32_array(getattr(module, name, None), what, name)
        return cls(get("weight_ih_l0"), get("weight_hh_l0"), get("bias_ih_l0"), get("bias_hh_l0"),
                   batch_first=module.batch_first, activation=activation)

    @property
    def kernel(self) -> str:
        """The GEMM micro-kernel the weights were packed for."""
        return self._op.kernel_name

    def __call__(self, x: ArrayIn, hx: tuple[ArrayIn, ArrayIn] | None = None, *, h0: ArrayIn | None = None,
                 c0: ArrayIn | None = None, lengths: ArrayIn | Sequence[int] | None = None) -> LSTMOutput:
        """Run the layer over a sequence.

        x: float32 (seq, batch, input_size), (batch, seq, input_size) with batch_first, or (seq, input_size)
          for one unbatched sequence. Views whose last axis is contiguous are read in place; other
          layouts (and misaligned data) are copied first.
        hx: (h0, c0) as for torch, each (1, batch, H) (unbatched: (1, H)) or None for zeros; or pass
          ``h0=`` / ``c0=`` instead.
        lengths: optional 1-D integer array, one length per batch entry, each in [0, seq], any order.
          Only the steps inside each sequence are computed (sorted by length, the batch shrinks as
          sequences end: seed I20); output rows beyond a sequence's length are zero (like torch's
          pack_padded_sequence + pad_packed_sequence with total_length=seq), and h_n / c_n hold each
          sequence's state after its own last step (h0 / c0 for a length of 0).
        Returns an :class:`LSTMOutput`: ``output, (h_n, c_n)`` with output of x's layout and H features,
        h_n and c_n (1, batch, H) (unbatched: (1, H)); and the wasted-compute accounting.
        """
        x = require_array(x, "x", F32)
        if x.ndim not in (2, 3):
            raise ValueError(f"x must be 3-D (seq, batch, input_size), or 2-D for one unbatched sequence, "
                             f"got shape {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"x must have input_size = {self.input_size} features in its last axis, got shape {x.shape}")
        return self._run(x, x.shape[:-1], hx, h0, c0, lengths, table=None)

    def precompute_embeddings(self, table: ArrayIn) -> None:
        """Store ``table @ w_ih.T + b_ih + b_hh`` for every row of an embedding table (vocab, input_size),
        so that :meth:`forward_tokens` copies each token's input projection instead of computing it
        (seed I17). Takes vocab x 4H x 4 bytes; replaces a previous table."""
        table = require_array(table, "table", F32)
        require_ndim(table, "table", (2,))
        if table.shape[1] != self.input_size:
            raise ValueError(f"table must have shape (vocab, {self.input_size}), got {table.shape}")
        self._op.set_table(c_aligned(table))  # calls running on another thread keep the old table
        self._embedding_table = read_only_copy(table)  # for pickling: projected again on load

    @property
    def projected_embeddings(self):
        """The (vocab, 4H) table stored by :meth:`precompute_embeddings` (read-only), or None."""
        return self._op.table

    def forward_tokens(self, ids: ArrayIn, hx: tuple[ArrayIn, ArrayIn] | None = None, *, h0: ArrayIn | None = None,
                       c0: ArrayIn | None = None, lengths: ArrayIn | Sequence[int] | None = None) -> LSTMOutput:
        """``self(table[ids], ...)`` for the table given to :meth:`precompute_embeddings`, without the input
        GEMM: bit-identical to it under the ISA cap the table was projected under (another cap's kernel
        rounds the projection differently, within the same bound).

        ids: integer array (seq, batch), (batch, seq) with batch_first, or (seq,) unbatched; each in
          [0, vocab) (negative ids are an error, not Python indexing). Other arguments as for __call__.
        """
        if self._op.table is None:
            raise RuntimeError("forward_tokens needs precompute_embeddings(table) first")
        ids = as_array(ids, "ids")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"ids must have an integer dtype, got {ids.dtype}")
        if ids.ndim not in (1, 2):
            raise ValueError(f"ids must be 2-D (seq, batch), or 1-D for one unbatched sequence, got shape {ids.shape}")
        # The outputs are allocated before ids is read (an absurd size fails at once, not after a scan);
        # the op checks every id against the table's rows (ValueError naming the first one out of range).
        return self._run(ids, ids.shape, hx, h0, c0, lengths, table=True)

    # -- shared by __call__ and forward_tokens --------------------------------------------------------

    def _run(self, x, lead, hx, h0, c0, lengths, table):
        H = self.hidden_size
        unbatched = len(lead) == 1
        if unbatched:
            seq, batch = lead[0], 1
        elif self.batch_first:
            batch, seq = lead
        else:
            seq, batch = lead
        h0, c0 = self._initial_state(hx, h0, c0, batch, unbatched)
        if lengths is not None:
            if unbatched:
                raise ValueError("lengths needs a batched input (an unbatched sequence has its own length)")
            lengths = _lengths_array(lengths, batch, seq)
        out_shape = (seq, H) if unbatched else ((batch, seq, H) if self.batch_first else (seq, batch, H))
        out = np.empty(out_shape, F32)
        h_n = np.empty((1, batch, H), F32)
        c_n = np.empty((1, batch, H), F32)
        computed = 0
        if seq and batch and H:
            x = _rows_readable(x) if not table else np.array(x, dtype=np.int64, order="C")
            x3 = x[:, None] if unbatched else x
            out3 = out[:, None] if unbatched else out
            computed = self._op.run(x3, bool(table), self.batch_first and not unbatched, h0, c0, lengths, out3,
                                    h_n, c_n, self.activation, _precision.resolve(self._precision) == "medium")
        else:
            out.fill(0.0)
            h_n[0] = 0.0 if h0 is None else h0
            c_n[0] = 0.0 if c0 is None else c0
        useful = int(lengths.sum()) if lengths is not None else seq * batch
        longest = int(lengths.max()) if lengths is not None and batch else seq
        if not H:
            computed = useful  # nothing to compute: every step is trivially done
        if unbatched:
            h_n, c_n = h_n[0], c_n[0]
        return LSTMOutput(out, h_n, c_n, useful, computed, batch * longest)

    def _initial_state(self, hx, h0, c0, batch, unbatched):
        if hx is not None:
            if h0 is not None or c0 is not None:
                raise ValueError("pass the initial state either as hx=(h0, c0) or as h0=/c0=, not both")
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("hx must be a tuple (h0, c0)")
            h0, c0 = hx
        H = self.hidden_size
        want = (1, H) if unbatched else (1, batch, H)
        states = []
        for s, name in ((h0, "h0"), (c0, "c0")):
            if s is not None:
                s = require_array(s, name, F32)
                if s.shape != want:
                    raise ValueError(f"{name} must have shape {want}, got {s.shape}")
                s = c_aligned(s.reshape(batch, H))
            states.append(s)
        return states

    def __getstate__(self):
        return {"w_ih": self._w_ih, "w_hh": self._w_hh, "b_ih": self._b_ih, "b_hh": self._b_hh,
                "batch_first": self._batch_first, "activation": self._activation, "table": self._embedding_table,
                "precision": self._precision}

    def __setstate__(self, state):
        # Repacked, and the embedding table projected again, under the current ISA cap.
        self.__init__(state["w_ih"], state["w_hh"], state["b_ih"], state["b_hh"], batch_first=state["batch_first"],
                      activation=state["activation"], precision=state.get("precision"))
        if state.get("table") is not None:
            self.precompute_embeddings(state["table"])

    def __repr__(self):
        return (f"LSTM(input_size={self.input_size}, hidden_size={self.hidden_size}, batch_first={self.batch_first}, "
                f"activation={self.activation!r}, kernel={self.kernel!r})")


def _lengths_array(lengths, batch, seq):
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind in "fb"):  # [] is float64
        raise TypeError(f"lengths must be integers, got dtype {arr.dtype}")
    if arr.shape != (batch,):
        raise ValueError(f"lengths must have shape ({batch},) (one per batch entry), got {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > seq):
        raise ValueError(f"lengths must be in [0, {seq}] (the sequence axis), got values in [{arr.min()}, {arr.max()}]")
    return np.array(arr, dtype=np.int64)  # a fresh, aligned copy


def _rows_readable(x):
    """x itself when each feature row is contiguous and the other strides are whole float32 steps
    (>= 0), else a C-contiguous copy."""
    ok = x.flags.aligned and (x.shape[-1] <= 1 or x.strides[-1] == x.itemsize)
    ok = ok and all(s >= 0 and s % x.itemsize == 0 for s in x.strides[:-1])
    return x if ok else np.array(x, order="C", copy=True)
