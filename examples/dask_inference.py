"""Batch inference with nnkern on a Dask cluster: one InferenceSession, pickled once to every worker, runs the
partitions of a batch where they were scattered; the outputs are gathered in order.

    python examples/dask_inference.py                          # a LocalCluster of 2 worker processes
    python examples/dask_inference.py --workers 4 --batch 256
    python examples/dask_inference.py --scheduler tcp://host:8786 --model model.onnx

Needs ``pip install "nnkern[dask,onnx]"`` here and on the workers. Run as a script, its task function travels by
value; imported, scatter_session uploads this file to the workers.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import time

import numpy as np
from distributed import Client, Future, LocalCluster

from nnkern.onnx import InferenceSession


def scatter_session(client: Client, model, num_threads: int = 1) -> Future:
    """Sends the session (a path, the model's bytes, a ModelProto or an InferenceSession) to every worker once: the
    model's bytes travel, so the workers need not see its file. Each worker unpickles it once and keeps it, so the
    plans it compiles serve every partition that runs there.
    One thread per session by default: the cluster's parallelism is its workers (one thread each)."""
    if __name__ != "__main__":  # imported, not run: the tasks name this module's _run, which workers must import
        client.upload_file(__file__)
    session = model if isinstance(model, InferenceSession) else InferenceSession(model, num_threads=num_threads)
    return client.scatter(session, broadcast=True, hash=False)


def map_partitions(client: Client, session: Future, batch: np.ndarray, input_name: str, partitions: int,
                   workers: list | None = None) -> list:
    """Splits the batch along its first axis and runs each part on the workers (all, or those listed); returns one
    future per part, whose result is the session's output list for that part."""
    parts = client.scatter(np.array_split(batch, partitions), workers=workers)  # spread over the workers, in turn
    # each task gets the worker's own copy of the session (unpickled once) and its part
    return client.map(_run, parts, session=session, input_name=input_name, workers=workers, pure=False)


def _run(part: np.ndarray, session: InferenceSession, input_name: str) -> list:
    # (a worker receives arrays at any byte offset in its network buffer: the session copies a misaligned one)
    return session.run(None, {input_name: part})


def run_partitions(client: Client, session: Future, batch: np.ndarray, input_name: str, partitions: int,
                   workers: list | None = None) -> list:
    """The session's outputs for the whole batch, as one ``session.run(None, {input_name: batch})`` returns them,
    computed in `partitions` parts on the cluster."""
    results = client.gather(map_partitions(client, session, batch, input_name, partitions, workers))
    return [np.concatenate(outputs) for outputs in zip(*results)]


def small_cnn(seed: int = 0) -> bytes:
    """A small CNN with random weights: three Conv+Relu layers, global pooling and a classifier; input
    'images' [batch, 3, 64, 64] (dynamic batch), output 'logits' [batch, 10]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, channels, x = [], [], 3, "images"
    for k, (out, stride) in enumerate([(32, 1), (64, 2), (64, 2)]):
        w = (rng.standard_normal((out, channels, 3, 3)) / np.sqrt(9 * channels)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(np.zeros(out, np.float32), f"b{k}")]
        nodes += [helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"], pads=[1, 1, 1, 1], strides=[stride] * 2),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"])]
        channels, x = out, f"r{k}"
    fc = (rng.standard_normal((10, channels)) / np.sqrt(channels)).astype(np.float32)
    inits += [numpy_helper.from_array(fc, "fc"), numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["pooled"]),
              helper.make_node("Flatten", ["pooled"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _images_per_second(run, images: int, repeats: int) -> float:
    run()  # compiles the plans for these shapes where they run
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return images / best


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scheduler", metavar="ADDRESS", help="a running cluster's scheduler (tcp://host:8786); "
                   "default: a LocalCluster of --workers processes, one thread each")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    p.add_argument("--batch", type=int, default=64, help="images in the batch (default 64)")
    p.add_argument("--model", metavar="PATH", help="an ONNX model whose first input has a dynamic batch "
                   "(default: a small CNN with random weights, 3x64x64 images)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs, the fastest counts (default 5)")
    args = p.parse_args(argv)

    local = InferenceSession(args.model or small_cnn(), num_threads=1)  # the reference, and what the workers get
    inp = local.get_inputs()[0]
    shape = [args.batch] + [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape[1:]]
    batch = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feed = {inp.name: batch}

    with contextlib.ExitStack() as stack:
        if args.scheduler:
            client = stack.enter_context(Client(args.scheduler))
        else:
            cluster = stack.enter_context(LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=None))
            client = stack.enter_context(Client(cluster))
        addresses = sorted(client.scheduler_info()["workers"])
        session = scatter_session(client, local)
        parts = min(len(addresses), args.batch)  # one per worker; the one-worker run gets the same parts

        outputs = run_partitions(client, session, batch, inp.name, parts)
        same = all(np.array_equal(a, b) for a, b in zip(outputs, local.run(None, feed)))
        print(f"model: {args.model or 'small CNN, 3x64x64 images'}; batch {args.batch} in {parts} partitions on "
              f"{client.scheduler.address}; outputs equal to one local run: {same}")
        runs = {"local session, 1 thread": functools.partial(local.run, None, feed)}
        for workers in {1: addresses[:1], len(addresses): addresses}.values():
            runs[f"{len(workers)} worker(s)"] = functools.partial(run_partitions, client, session, batch, inp.name,
                                                                  parts, workers)
        for name, run in runs.items():
            print(f"{name:<24}{_images_per_second(run, args.batch, args.repeats):10.1f} images/s")
    if not same:
        raise SystemExit("the cluster's outputs differ from the local run")


if __name__ == "__main__":  # the guard that spawned worker processes need
    main()
