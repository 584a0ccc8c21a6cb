"""examples/dask_inference.py: an InferenceSession pickled to the worker processes of a dask.distributed cluster
runs the partitions of a batch on every worker, and the gathered outputs equal one local run bit for bit. Dask is
an optional extra: ``import nnkern`` never imports it."""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

from helpers import describe_process, run_python_isolated

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "dask_inference.py"


def test_import_nnkern_does_not_import_dask():
    code = ("import importlib.util, sys, nnkern\n"
            "if importlib.util.find_spec('onnx'): import nnkern.onnx\n"
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules, 'nnkern imported dask'")
    proc = run_python_isolated(code)  # (through the emulator where the suite runs emulated)
    assert proc.returncode == 0, describe_process(proc)


@pytest.fixture(scope="module")
def example():
    """The example module, imported by path under its own name as a user's `import dask_inference` would: its
    task function goes by name, and the workers, which lack examples/ on their path, get the file from
    scatter_session."""
    pytest.importorskip("distributed", reason="needs dask: pip install 'dask[distributed]' (nnkern[dask])")
    pytest.importorskip("onnx")
    spec = importlib.util.spec_from_file_location("dask_inference", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.fixture(scope="module")
def client(example):
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def test_partitions_run_on_both_workers_and_equal_one_local_run(example, client):
    from nnkern.onnx import InferenceSession

    local = InferenceSession(example.small_cnn(), num_threads=1)  # one thread, as on the workers: same algorithms
    batch = np.random.default_rng(0).standard_normal((7, 3, 64, 64)).astype(np.float32)
    workers = set(client.scheduler_info()["workers"])
    assert len(workers) == 2

    session = example.scatter_session(client, local)
    assert set(client.who_has(session)[session.key]) == workers  # one copy on each worker

    futures = example.map_partitions(client, session, batch, "images", 4)  # parts of 2, 2, 2 and 1 images
    parts = client.gather(futures)
    held = client.who_has(futures)  # a result stays where its task ran
    assert {addr for f in futures for addr in held[f.key]} == workers
    assert [p[0].shape[0] for p in parts] == [2, 2, 2, 1]

    expected = local.run(None, {"images": batch})
    outputs = example.run_partitions(client, session, batch, "images", 4)
    assert len(outputs) == len(expected) == 1
    assert outputs[0].dtype == expected[0].dtype and outputs[0].shape == (7, 10)
    assert np.array_equal(outputs[0], expected[0])
    assert np.array_equal(np.concatenate([p[0] for p in parts]), expected[0])


def test_a_misaligned_part_is_copied(example):
    """A worker receives an array at whatever byte offset it has in the message: the session copies a misaligned
    one before its plan runs it (the offset varies with the message, so the cluster test may not meet one)."""
    from nnkern.onnx import InferenceSession

    local = InferenceSession(example.small_cnn(), num_threads=1)
    batch = np.random.default_rng(1).standard_normal((2, 3, 64, 64)).astype(np.float32)
    part = np.zeros(batch.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(batch.shape)
    part[...] = batch
    assert not part.flags.aligned
    assert np.array_equal(example._run(part, local, "images")[0], local.run(None, {"images": batch})[0])
