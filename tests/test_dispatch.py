"""ISA cap semantics, NNKERN_MAX_ISA, cpu_info and thread-count validation."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import nnkern
from nnkern import _C
from helpers import python_command


def best_within(cap: str, with_f32_kernel: bool = False) -> str:
    """The best supported level that the cap allows (``cpu_info()["isa"]``), where a level is allowed if it
    is the cap, scalar, or below it in the partial order (avxvnni is a side branch of avx2: it is below
    avx512vnni but not below avx512). with_f32_kernel: the best such level that has an f32_gemm kernel
    of its own (the one the dispatcher picks for sgemm)."""
    below = {
        "scalar": {"scalar"},
        "avx2": {"scalar", "avx2"},
        "avxvnni": {"scalar", "avx2", "avxvnni"},
        "avx512": {"scalar", "avx2", "avx512"},
        "avx512vnni": {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni"},
        "avx512bf16": {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"},
        "amx": {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16", "amx"},
        "neon": {"scalar", "neon"},
        "neondot": {"scalar", "neon", "neondot"},
        "neoni8mm": {"scalar", "neon", "neondot", "neoni8mm"},
        "neonbf16": {"scalar", "neon", "neondot", "neoni8mm", "neonbf16"},
    }[cap]
    best = "scalar"
    for level in nnkern.ISA_LEVELS:
        if level in below and level in nnkern.supported_isas():
            if with_f32_kernel:
                try:
                    _C.f32_gemm_tile(level)
                except ValueError:
                    continue
            best = level
    return best


def kernel_of(level: str) -> str:
    return _C.f32_gemm_tile(level)[0]


def test_isa_levels_are_known_names():
    assert nnkern.ISA_LEVELS[0] == "scalar"
    assert len(set(nnkern.ISA_LEVELS)) == len(nnkern.ISA_LEVELS)
    if nnkern.cpu_info()["arch"] == "x86_64":
        assert nnkern.ISA_LEVELS == ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16", "amx")
    else:
        assert nnkern.ISA_LEVELS == ("scalar", "neon", "neondot", "neoni8mm", "neonbf16")
    supported = nnkern.supported_isas()
    assert supported[0] == "scalar"
    assert set(supported) <= set(nnkern.ISA_LEVELS)


@pytest.mark.parametrize("bad", ["AVX2", "sse", "", "avx512 ", None, 3])
def test_unknown_isa_name_raises_listing_valid_names(bad):
    before = nnkern.get_max_isa()
    with pytest.raises(ValueError) as e:
        nnkern.set_max_isa(bad)
    for level in nnkern.ISA_LEVELS:
        assert level in str(e.value)
    with pytest.raises(ValueError):
        with nnkern.max_isa(bad):
            pass
    assert nnkern.get_max_isa() == before


@pytest.mark.parametrize("cap", nnkern.ISA_LEVELS)
def test_cap_picks_best_supported_level_within_it(cap):
    """Every name is accepted; a cap above the CPU uses what the CPU has."""
    nnkern.set_max_isa(cap)
    info = nnkern.cpu_info()
    assert nnkern.get_max_isa() == cap and info["max_isa"] == cap
    assert info["isa"] == best_within(cap)
    assert info["kernels"]["f32_gemm"] == kernel_of(best_within(cap, with_f32_kernel=True))
    assert set(info["active_isas"]) <= set(nnkern.supported_isas())


def test_default_cap_is_best_supported_level():
    proc = run_python("import nnkern; i = nnkern.cpu_info(); print(i['max_isa'], i['isa'])",
                      env_cap=None)
    assert proc.returncode == 0, proc.stderr
    max_isa, isa = proc.stdout.split()
    assert max_isa == nnkern.supported_isas()[-1]
    assert isa == best_within(max_isa)


def test_max_isa_context_manager_restores_cap_on_exit_and_on_error():
    nnkern.set_max_isa(nnkern.supported_isas()[-1])
    before = nnkern.get_max_isa()
    with nnkern.max_isa("scalar"):
        assert nnkern.get_max_isa() == "scalar"
        assert nnkern.cpu_info()["kernels"]["f32_gemm"] == kernel_of("scalar")
        with nnkern.max_isa(before):  # nesting
            assert nnkern.get_max_isa() == before
        assert nnkern.get_max_isa() == "scalar"
    assert nnkern.get_max_isa() == before
    with pytest.raises(RuntimeError, match="boom"):
        with nnkern.max_isa("scalar"):
            raise RuntimeError("boom")
    assert nnkern.get_max_isa() == before


def test_computation_follows_the_cap():
    """The cap changes the kernel that runs, not the (bounded) result."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((37, 29), np.float32), rng.standard_normal((29, 23), np.float32)
    ref = a.astype(np.float64) @ b
    for level in nnkern.supported_isas():
        with nnkern.max_isa(level):
            np.testing.assert_allclose(nnkern.matmul(a, b), ref, rtol=1e-4, atol=1e-4, err_msg=level)


def run_python(code: str, env_cap=None):
    env = dict(os.environ)
    env.pop("NNKERN_MAX_ISA", None)
    if env_cap is not None:
        env["NNKERN_MAX_ISA"] = env_cap
    return subprocess.run(python_command("-c", code), env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("cap", nnkern.ISA_LEVELS)
def test_environment_variable_sets_initial_cap(cap):
    proc = run_python("import nnkern; i = nnkern.cpu_info(); print(i['max_isa'], i['isa'], i['kernels']['f32_gemm'])",
                      env_cap=cap)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [cap, best_within(cap), kernel_of(best_within(cap, with_f32_kernel=True))]


def test_environment_variable_tolerates_surrounding_whitespace():
    proc = run_python("import nnkern; print(nnkern.get_max_isa())", env_cap=" scalar\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "scalar"


@pytest.mark.parametrize("bad", ["avx3", "AVX2", "native"])
def test_environment_variable_invalid_value_warns_and_is_ignored(bad):
    """A typo in the environment must not break ``import nnkern``: a warning names the variable and the
    valid levels, and the cap stays at the CPU's best level."""
    proc = run_python("import nnkern; print(nnkern.get_max_isa())", env_cap=bad)
    assert proc.returncode == 0, proc.stderr
    assert "RuntimeWarning" in proc.stderr and "NNKERN_MAX_ISA ignored" in proc.stderr and repr(bad) in proc.stderr
    for level in nnkern.ISA_LEVELS:
        assert level in proc.stderr
    default = run_python("import nnkern; print(nnkern.get_max_isa())")
    assert proc.stdout.strip() == default.stdout.strip() == nnkern.supported_isas()[-1]


def sysfs_cache_bytes(level, kind):
    """cpu0's cache of `level` and type `kind` (or Unified) as sysfs describes it, or None."""
    import glob
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(d + "/level") as f_level, open(d + "/type") as f_type, open(d + "/size") as f_size:
                lv, ty, size = int(f_level.read()), f_type.read().strip(), f_size.read().strip()
        except (OSError, ValueError):
            continue
        if lv == level and ty in (kind, "Unified"):
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
            return int(size.rstrip("KM")) * scale
    return None


@pytest.mark.parametrize("key, level, kind", [("l1d", 1, "Data"), ("l2", 2, "Unified"), ("l3", 3, "Unified")])
def test_cache_sizes_match_sysfs(key, level, kind):
    """The cache sizes the blocking is derived from, parsed from sysfs (where the system has it)."""
    want = sysfs_cache_bytes(level, kind)
    if want is None:
        pytest.skip(f"no sysfs entry for the L{level} cache on this system")
    assert nnkern.cpu_info()["caches"][key] == want


def test_cpu_info_keys_and_types():
    info = nnkern.cpu_info()
    for key in ("arch", "vendor", "model", "features", "caches", "isa_levels", "supported_isas", "max_isa",
                "active_isas", "isa", "kernels", "num_threads"):
        assert key in info, key
    assert info["arch"] in ("x86_64", "aarch64")
    assert isinstance(info["vendor"], str) and isinstance(info["model"], str)
    assert all(isinstance(v, bool) for v in info["features"].values())
    assert set(info["caches"]) >= {"l1d", "l2", "l3"}
    assert all(isinstance(v, int) and v >= 0 for v in info["caches"].values())
    assert tuple(info["isa_levels"]) == nnkern.ISA_LEVELS
    assert info["supported_isas"] == nnkern.supported_isas()
    assert info["isa"] == info["active_isas"][-1]
    assert info["kernels"]["f32_gemm"] == kernel_of(best_within(info["max_isa"], with_f32_kernel=True))
    assert info["num_threads"] == nnkern.get_num_threads()


def test_x86_features_are_consistent_with_supported_levels():
    info = nnkern.cpu_info()
    if info["arch"] != "x86_64":
        pytest.skip("x86-64 only")
    f = info["features"]
    sup = nnkern.supported_isas()
    if "avx2" in sup:
        assert f["avx2"] and f["fma"] and f["os_ymm"]
    if "avx512" in sup:
        assert "avx2" in sup and f["avx512f"] and f["avx512bw"] and f["avx512dq"] and f["avx512vl"] and f["os_zmm"]
    if "avx512vnni" in sup:
        assert "avx512" in sup and f["avx512_vnni"]
    if "avxvnni" in sup:
        assert "avx2" in sup and f["avx_vnni"]
    assert ("avx512bf16" in sup) == ("avx512vnni" in sup and f["avx512_bf16"])
    # amx: CPUID, the OS's XCR0 and Linux's per-process permission, all three (and AVX512_BF16 and AMX-BF16, as
    # every AMX CPU: the bf16 tile kernel is at this level too).
    assert ("amx" in sup) == ("avx512bf16" in sup and f["amx_tile"] and f["amx_int8"] and f["amx_bf16"]
                              and f["os_amx"] and f["amx_permitted"])
    if f["amx_permitted"]:
        assert f["amx_tile"] and f["os_amx"]


def test_set_num_threads_roundtrip_and_reported():
    for n in (1, 3, 2):
        nnkern.set_num_threads(n)
        assert nnkern.get_num_threads() == n
        assert nnkern.cpu_info()["num_threads"] == n
    nnkern.set_num_threads(np.int64(1))
    assert nnkern.get_num_threads() == 1


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError),
                                      (None, TypeError)])
def test_set_num_threads_rejects_bad_values(bad, exc):
    before = nnkern.get_num_threads()
    with pytest.raises(exc):
        nnkern.set_num_threads(bad)
    assert nnkern.get_num_threads() == before


def test_blocking_mode_validation_and_blocks():
    with pytest.raises(ValueError):
        _C.set_blocking_mode("fast")
    _C.set_blocking_mode("fixed")
    assert _C.get_blocking_mode() == "fixed"
    assert tuple(_C.gemm_blocking(1000)) == (256, 4032, 48)
    assert _C.gemm_order(4096, 4096) == "panel"  # the seed's loop, whatever the shape
    _C.set_blocking_mode("cache")
    kernel = nnkern.cpu_info()["kernels"]["f32_gemm"]
    mr, nr = next((k["mr"], k["nr"]) for k in _C.kernel_list("f32_gemm") if k["name"] == kernel)
    for order in ("panel", "block"):
        for K in (1, 7, 300, 5000):
            kc, mc, nc = _C.gemm_blocking(K, order)
            assert kc >= 1 and mc >= 1 and nc >= 1
            assert kc % 8 == 0  # whole K unrolls
            assert mc % mr == 0 and nc % nr == 0  # blocks start on panel / sliver boundaries
    with pytest.raises(ValueError):
        _C.gemm_blocking(64, "blis")
    # C beyond L2 runs in block order (deeper K blocks: fewer passes over C), a small one in panel order.
    assert _C.gemm_order(4096, 4096) == "block"
    assert _C.gemm_order(16, 16) == "panel"


# --- AMX: CPUID, XCR0 and Linux's per-process permission --------------------------------------------

AMX_PROBE = r"""
import ctypes, ctypes.util, json, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
if sys.argv[1] == "small-sigaltstack":
    # Linux refuses the AMX permission while any thread's alternate signal stack is too small for the
    # larger signal frame (about 11 KiB of tile data): the refusal a process meets in the wild.
    class StackT(ctypes.Structure):
        _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]
    buf = ctypes.create_string_buffer(8192)
    assert libc.sigaltstack(ctypes.byref(StackT(ctypes.cast(buf, ctypes.c_void_p), 0, 8192)), None) == 0
import numpy as np
import nnkern
a = np.arange(35 * 70, dtype=np.int64).reshape(35, 70) % 256
b = (np.arange(70 * 33, dtype=np.int64).reshape(70, 33) * 7) % 256 - 128
exact = bool((nnkern.qgemm(a.astype(np.uint8), b.astype(np.int8)) == a @ b).all())
mask = ctypes.c_ulong(0)
libc.syscall.restype = ctypes.c_long
libc.syscall(158, 0x1022, ctypes.byref(mask))  # SYS_arch_prctl, ARCH_GET_XCOMP_PERM
info = nnkern.cpu_info()
print(json.dumps(dict(supported=nnkern.supported_isas(), kernel=info["kernels"]["u8s8_gemm"], exact=exact,
                      granted=bool(mask.value >> 18 & 1), permitted=info["features"]["amx_permitted"])))
"""


def amx_probe(case, env_cap=None):
    import json
    env = dict(os.environ)
    env.pop("NNKERN_MAX_ISA", None)
    if env_cap:
        env["NNKERN_MAX_ISA"] = env_cap
    proc = subprocess.run(python_command("-c", AMX_PROBE, case), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def amx_hardware():
    f = nnkern.cpu_info()["features"]
    if nnkern.cpu_info()["arch"] != "x86_64":
        pytest.skip("x86-64 only")
    if not (f["amx_tile"] and f["amx_int8"] and f["amx_bf16"] and f["os_amx"]):
        pytest.skip("CPU lacks amx (AMX-TILE, AMX-INT8, AMX-BF16 and the OS's XTILEDATA state)")


def test_amx_refused_by_the_os_is_never_dispatched():
    amx_hardware()
    got = amx_probe("small-sigaltstack")
    assert not got["permitted"] and not got["granted"] and "amx" not in got["supported"]
    assert got["kernel"] == "u8s8_gemm_64x6c4__avx512vnni" and got["exact"]


def test_amx_granted_and_dispatched():
    amx_hardware()
    got = amx_probe("plain")
    assert got["permitted"] and got["granted"] and "amx" in got["supported"]
    assert got["kernel"] == "u8s8_gemm_32x32c4__amx" and got["exact"]


def test_lower_cap_at_start_never_asks_for_amx():
    """NNKERN_MAX_ISA below amx: the permission (which makes Linux refuse small sigaltstacks for the rest of
    the process) is never requested, and the VNNI kernel runs."""
    amx_hardware()
    got = amx_probe("plain", env_cap="avx512vnni")
    assert not got["granted"] and "amx" not in got["supported"]
    assert got["kernel"] == "u8s8_gemm_64x6c4__avx512vnni" and got["exact"]
