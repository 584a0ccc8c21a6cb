"""tools/conv_loads_model.py: the mGEMM paper's NEON figures, the search, the register budgets, and the
traffic formulas against a literal loop nest that computes a small convolution and counts what it loads."""
from __future__ import annotations

import importlib.util
import random
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "tools" / "conv_loads_model.py"
_spec = importlib.util.spec_from_file_location("conv_loads_model", _PATH)
m = importlib.util.module_from_spec(_spec)
sys.modules["conv_loads_model"] = m
_spec.loader.exec_module(m)


def test_paper_neon_figures():
    # mGEMM c_o=8, c_i=4, w_o=8, w_f=1 at W_fil=3, C_in=256: "about 0.140" in the paper's accounting
    # (input vector loads counted as one op) = 9/64 exactly; 0.1797 with every operand in floats.
    paper = m.paper_loads_per_mac(8, 8, 1, 3, 256)
    assert paper == pytest.approx(9 / 64, abs=1e-15) and abs(paper - 0.140) < 0.001
    assert m.mgemm_loads_per_mac(8, 8, 1, 3, 256) == pytest.approx(23 / 128, abs=1e-15)
    # GEMM 8x12 over K = 3 * 256: "about 0.211", and the search's best NEON GEMM is that kernel.
    assert round(m.gemm_loads_per_mac(8, 12, 768), 3) == 0.211
    mr, nr, loads, _ = m.best_gemm("neon", 768)
    assert (mr, nr) == (8, 12) and round(loads, 3) == 0.211


def test_neon_search_finds_the_papers_blocking():
    # With w_o a power of two (as the paper's kernels are) the search picks the paper's blocking.
    b = m.best_blocking("neon", 3, 256, pow2_w_o=True)
    assert (b.c_o, b.c_i, b.w_o, b.w_f) == (8, 4, 8, 1) and b.regs == 104
    # Unrestricted it finds w_o=10, which fills all 128 floats: fewer loads than the paper's blocking.
    b = m.best_blocking("neon", 3, 256)
    assert (b.c_o, b.c_i, b.w_o, b.w_f) == (8, 4, 10, 1) and b.regs == 128
    assert b.loads < m.mgemm_loads_per_mac(8, 8, 1, 3, 256)


@pytest.mark.parametrize("isa", sorted(m.ISAS))
def test_every_blocking_respects_its_isa(isa):
    spec = m.ISAS[isa]
    for w_fil, c_in, stride in [(3, 64, 1), (3, 256, 2), (1, 128, 1), (5, 512, 1), (7, 96, 2)]:
        found = list(m.blockings(spec, w_fil, c_in, stride))
        assert found and m.best_blocking(isa, w_fil, c_in, stride) in found
        for b in found:
            held = b.mode != "broadcast"
            assert b.regs == m.mgemm_registers(spec, b.c_o, b.c_i, b.w_o, b.w_f, stride, held)
            assert b.regs <= (spec.regs - spec.scratch) * spec.lanes
            assert b.c_o % spec.lanes == 0 and b.c_o * b.w_o >= 8 * spec.lanes
            assert (b.c_i % spec.lanes == 0 and c_in % b.c_i == 0) if spec.by_lane else b.c_i == 1
            assert b.mem_per_fma <= 1 and 1 <= b.w_f <= w_fil
    mr, nr, _, regs = m.best_gemm(isa, 768)
    assert regs <= (spec.regs - spec.scratch) * spec.lanes and mr * nr >= 8 * spec.lanes


def simulate(c_o, c_i, w_o, w_f, w_fil, c_in, stride, mode, lanes):
    """Runs the kernel's loop nest on integers; every FMA operand comes from a register dict or, in
    "broadcast" mode, a counted load. Returns (floats per MAC by operand, peak floats of registers)."""
    rng = random.Random(c_o * 1000 + w_o * 100 + w_f * 10 + stride)
    cols = (w_o - 1) * stride + w_fil
    x = [[rng.randint(-9, 9) for _ in range(cols)] for _ in range(c_in)]
    w = [[[rng.randint(-9, 9) for _ in range(w_fil)] for _ in range(c_in)] for _ in range(c_o)]
    out = [[rng.randint(-9, 9) for _ in range(w_o)] for _ in range(c_o)]
    n, peak, macs = Counter(), 0, 0
    acc = {(co, o): out[co][o] for co in range(c_o) for o in range(w_o)}
    n["outputs"] += len(acc)
    for ci0 in range(0, c_in, c_i):
        held, in_regs = {}, 0
        for f0 in range(0, w_fil, w_f):
            fs = range(f0, min(f0 + w_f, w_fil))
            if mode != "broadcast":  # keep what this step shares with the last one, load the rest
                need = {(ci, o * stride + f) for ci in range(ci0, ci0 + c_i) for o in range(w_o) for f in fs}
                n["inputs"] += len(need - held.keys())
                held = {k: held[k] if k in held else x[k[0]][k[1]] for k in need}
                in_regs = len(held) * (1 if mode == "lane" else lanes)
            for ci in range(ci0, ci0 + c_i):
                wreg = {(co, f): w[co][ci][f] for co in range(c_o) for f in fs}
                n["weights"] += len(wreg)
                peak = max(peak, len(acc) + len(wreg) + in_regs)
                for f in fs:
                    for o in range(w_o):
                        if mode == "broadcast":
                            v = x[ci][o * stride + f]
                            n["inputs"] += 1
                        else:
                            v = held[(ci, o * stride + f)]
                        for co in range(c_o):
                            acc[(co, o)] += wreg[(co, f)] * v
                            macs += 1
    n["outputs"] += len(acc)
    for (co, o), got in acc.items():
        want = out[co][o] + sum(w[co][ci][f] * x[ci][o * stride + f] for ci in range(c_in) for f in range(w_fil))
        assert got == want
    assert macs == c_o * w_o * c_in * w_fil
    return {k: Fraction(v, macs) for k, v in n.items()}, peak


@pytest.mark.parametrize("mode,isa,c_i", [("lane", "neon", 4), ("held", "avx2", 1), ("broadcast", "avx512", 1)])
@pytest.mark.parametrize("w_o,w_f,w_fil,stride", [
    (3, 1, 3, 1), (4, 2, 3, 1), (3, 3, 3, 1), (5, 2, 5, 1), (3, 1, 3, 2), (4, 2, 5, 2), (3, 3, 3, 2),
    (2, 2, 5, 3), (3, 1, 1, 1), (2, 4, 7, 2)])
def test_formula_matches_loop_nest(mode, isa, c_i, w_o, w_f, w_fil, stride):
    spec, c_o, c_in = m.ISAS[isa], 8, 8
    got, peak = simulate(c_o, c_i, w_o, w_f, w_fil, c_in, stride, mode, spec.lanes)
    want = m.mgemm_traffic(c_o, w_o, w_f, w_fil, c_in, stride, held=mode != "broadcast")
    for k in ("inputs", "weights", "outputs"):
        assert float(got[k]) == pytest.approx(want[k], rel=1e-12), k
    assert peak == m.mgemm_registers(spec, c_o, c_i, w_o, w_f, stride, held=mode != "broadcast")


def test_gemm_formula_matches_loop_nest():
    mr, nr, k = 8, 3, 5
    rng = random.Random(0)
    a = [[rng.randint(-9, 9) for _ in range(k)] for _ in range(mr)]
    b = [[rng.randint(-9, 9) for _ in range(nr)] for _ in range(k)]
    acc, moved = [[0] * nr for _ in range(mr)], 2 * mr * nr  # C loaded and stored once
    for p in range(k):
        col, row = [a[i][p] for i in range(mr)], b[p][:]  # the only loads of a k step
        moved += len(col) + len(row)
        for i in range(mr):
            for j in range(nr):
                acc[i][j] += col[i] * row[j]
    assert acc == [[sum(a[i][p] * b[p][j] for p in range(k)) for j in range(nr)] for i in range(mr)]
    assert m.gemm_loads_per_mac(mr, nr, k) == pytest.approx(moved / (mr * nr * k), rel=1e-12)


def test_cli_prints_every_isa(capsys):
    m.main(["--c-in", "64", "256", "--stride", "1", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 12 and all("loads/MAC" in s and "GEMM" in s for s in lines)
