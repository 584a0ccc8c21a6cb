"""``python -m nnkern [info|check|bench|run]``.

(no command)  the main job (< 1 minute): CPU, chosen kernels, a self-check of every kernel this CPU
              can run (PASS/FAIL, exit code 1 on any FAIL) and a short SGEMM table versus numpy.
info          just the CPU and the chosen kernels.
check         just the self-check.
bench         the fuller SGEMM table against every installed comparison library, 1 and 2 threads
              (--op linear: FP32 Linear with prepacked weights instead; --op qgemm / qlinear / int8: the
              INT8 GEMM tables, % of the int8 peak;
              --op lstm: nnkern.LSTM per activation method vs torch.nn.LSTM, 1 thread;
              --op qconv: QConv2d per algorithm vs torch / onnxruntime on ResNet-50 and MobileNet-v2 layers;
              --op conv: FP32 Conv2d per algorithm and auto vs torch (channels_last, NCHW) / onnxruntime on
              ResNet-50, MobileNet-v2, YoloV3-Tiny, VGG-16 and a low-OC layer; --op networks: whole networks exported
              from their torch definitions (nnkern.bench.models) through nnkern.onnx vs onnxruntime and torch,
              float and INT8, batch 1 and 8, with the outputs' differences and top-1 agreement (--profile: also
              nnkern's time by op kind before / after its optimizations; --memory: also the peak memory of
              nnkern and onnxruntime); --op yolo / mobilenet / qnet / espcn: those networks of it; --op fused:
              QConv2d's fused global average pooling and pixel shuffle vs the unfused sequences and torch).
run MODEL     an ONNX model through nnkern.onnx: its outputs' shapes and statistics, the latency and the
              compiled plan (--input NAME=FILE.npy, --dim NAME=VALUE, --batch N, --threads N, --profile);
              bench --model MODEL.onnx times it against onnxruntime on the same inputs.
"""
from __future__ import annotations

import argparse
import sys
import time

MAIN_SHAPES = [(17, 13, 9), (64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (8, 1024, 1024)]


def _version() -> str:
    import nnkern
    return nnkern.__version__


def _kib(n: int) -> str:
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n // 1024} KiB"


def print_info() -> None:
    import nnkern
    from nnkern import _C
    i = nnkern.cpu_info()
    print(f"nnkern {nnkern.__version__}  arch {i.get('arch')}")
    print(f"CPU: {i.get('vendor')} / {i.get('model')}")
    print("features: " + " ".join(k for k, v in i.get("features", {}).items() if v))
    print("caches: " + ", ".join(f"{k} {_kib(v)}" for k, v in i.get("caches", {}).items()))
    print(f"ISA levels supported: {', '.join(i.get('supported_isas', []))};  cap {i.get('max_isa')};  "
          f"threads {i.get('num_threads')}")
    for op, k in i.get("kernels", {}).items():
        print(f"kernel {op}: {k}")
    if hasattr(_C, "gemm_blocking"):
        print(f"sgemm blocking ({_C.get_blocking_mode()}) at K=1024, kc, mc, nc: panel order "
              f"{_C.gemm_blocking(1024, 'panel')}, block order {_C.gemm_blocking(1024, 'block')}; "
              f"1024 x 1024 runs in {_C.gemm_order(1024, 1024)} order")


def run_check() -> bool:
    from nnkern.bench import selfcheck
    print("\n## self-check (every ISA this CPU can run, vs float64 reference)")
    t0 = time.perf_counter()
    ok = selfcheck.run()
    print(f"self-check: {'ALL PASS' if ok else 'FAILURES'} ({time.perf_counter() - t0:.1f} s)")
    return ok


def main_job() -> int:
    from nnkern.bench import harness, ops
    print_info()
    ok = run_check()
    print("\n## short benchmark, 1 thread, vs numpy (median of 5 x 20 ms)")
    print(harness.peaks_line("f32", "GFLOP/s"))
    results = harness.run(ops.sgemm_vs_numpy_op(), MAIN_SHAPES, (1,), repeats=5, progress=None)
    print(harness.markdown_table(results, 1))
    print("(full table vs onnxruntime/oneDNN/torch: python -m nnkern bench)")
    return 0 if ok else 1


def bench_elementwise(args) -> int:
    from nnkern.bench import elementwise
    print_info()
    if args.op == "topk":
        table, records = elementwise.topk_table(repeats=args.repeats)
    else:
        sizes = [int(s) for s in args.shapes] if args.shapes else elementwise.ACT_SIZES
        table, records = elementwise.activation_table(args.op, sizes, repeats=args.repeats)
    print(table)
    _plot(args, lambda plot: plot.from_records(args.op, records))
    _write_json(args, records)
    return 0


def bench_lstm(args) -> int:
    """nnkern.LSTM (accurate / scalef / minimax) vs torch.nn.LSTM, seq 50, then the dynamic batch (I20)."""
    from nnkern.bench import lstm
    print_info()
    threads = [int(t) for t in (args.threads or "1").split(",") if t.strip()]
    if args.shapes:
        shapes = [tuple(int(v) for v in s.replace("x", ",").split(",")) for s in args.shapes]
    else:
        shapes = lstm.LSTM_SHAPES[:1] + lstm.LSTM_SHAPES[3:4] if args.quick else lstm.LSTM_SHAPES
    records = []
    for t in threads:
        table, recs = lstm.lstm_table(shapes, repeats=args.repeats, threads=t,
                                      progress=lambda s: print(s, flush=True))
        print()
        print(table)
        print()
        records += recs
        if not args.quick:
            table, recs = lstm.dynamic_batch_table(repeats=args.repeats, threads=t)
            print(table)
            print()
            records += recs
    _plot(args, lambda plot: [c for t in threads for c in
                              plot.from_records("lstm", [r for r in records if r["threads"] == t], t)])
    _write_json(args, records)
    return 0


def bench_int8(args, threads) -> int:
    """qgemm (B packed per call) and/or QLinear (prepacked, fused u8 requantization) vs ORT / oneDNN / torch."""
    from nnkern.bench import harness, ops
    import nnkern
    if args.shapes:
        shapes = [harness.parse_shape(s) for s in args.shapes]
    else:
        shapes = ops.QGEMM_QUICK if args.quick else ops.QGEMM_SHAPES
    isas = args.isa.split(",") if args.isa else harness.bench_isas("u8s8_gemm")
    names = {"qgemm": ["qgemm"], "qlinear": ["qlinear"], "int8": ["qgemm", "qlinear"]}[args.op]
    print_info()
    print(harness.peaks_line("int8", "GOP/s", isas))
    t0 = time.perf_counter()
    results = []
    for name in names:
        op = ops.qgemm_op() if name == "qgemm" else ops.qlinear_op()
        results += harness.run(op, shapes, threads, isas=isas, repeats=args.repeats,
                               libraries=_libraries(args), progress=lambda s: print(s, flush=True))
    print(f"\n({time.perf_counter() - t0:.0f} s; nnkern kernels: {nnkern.cpu_info()['kernels']})\n")
    for name in names:
        for t in threads:
            print(harness.markdown_table(results, t, op=name))
            print()
        _print_scaling(results, threads, name)
    print(harness.peaks_line("int8", "GOP/s", isas) + "  (avx2/avx512: the saturating vpmaddubsw sequence; "
          "avxvnni/avx512vnni: vpdpbusd; amx: tdpbusd)")
    _plot(args, lambda plot: plot.from_results(results, threads, names))
    return _json(args, results)


def bench_conv(args, threads, kind) -> int:
    """A conv.Kind's layers (qconv: QConv2d vs torch quantized conv2d / QLinearConv; conv: FP32 Conv2d vs torch
    conv2d channels_last and NCHW / onnxruntime Conv), per algorithm, per network layer."""
    from nnkern.bench import conv, harness
    import nnkern
    layers = conv.select(args.shapes, args.quick, kind, _batches(args.batch, (1,)))
    isa = args.isa.split(",")[-1] if args.isa else kind.default_isa()
    print_info()
    print(harness.peaks_line(kind.peak_kind, kind.unit, [isa]))
    t0 = time.perf_counter()
    results, notes = conv.run(layers, threads, isa=isa, repeats=args.repeats, libraries=_libraries(args),
                              progress=lambda s: print(s, flush=True), kind=kind)
    print(f"\n({time.perf_counter() - t0:.0f} s; nnkern kernels: {nnkern.cpu_info()['kernels']})\n")
    for t in threads:
        print(conv.markdown_table(results, t, notes, kind))
        print()
    for t in threads[1:]:
        print(conv.scaling_table(results, t, threads[0]) + "\n")
    return _conv_outputs(args, results, threads)


def _conv_outputs(args, results, threads) -> int:
    """The convolution tables' charts (--plot) and JSON (--json)."""
    from nnkern.bench import conv
    _plot(args, lambda plot: conv.charts(results, threads))
    return _json(args, results)


def bench_networks(args, threads) -> int:
    """Whole networks from their torch definitions through nnkern.onnx vs onnxruntime / torch, float and INT8
    (--op networks; --op yolo / mobilenet / qnet / espcn select those networks)."""
    from nnkern.bench import networks
    names, precisions, input_size = networks.select(args.shapes, args.op)
    batches = _batches(args.batch, networks.BATCHES)
    print_info()
    t0 = time.perf_counter()
    results, notes = networks.run(names, threads, precisions=precisions, batches=batches,
                                  size="test" if args.quick else "bench", input_size=input_size,
                                  repeats=args.repeats, libraries=_libraries(args), profile=args.profile,
                                  memory=args.memory, also=[lv for lv in networks.ALSO if getattr(args, lv)],
                                  progress=lambda s: print(s, flush=True))
    print(f"\n({time.perf_counter() - t0:.0f} s)\n")
    for t in threads:
        print(networks.markdown_table(results, t, notes))
        print()
    if args.profile:
        print(networks.profile_tables(results) + "\n")
    if args.memory:
        print(networks.memory_table(results, notes) + "\n")
    _plot(args, lambda plot: networks.charts(results, threads))
    return _json(args, results)


def bench_overhead(args) -> int:
    """--op overhead: the per-step cost of a compiled plan against onnxruntime's (chains of cheap nodes)."""
    from nnkern.bench import overhead
    print_info()
    records = overhead.measure(repeats=args.repeats or 7)
    print(overhead.table(records))
    _write_json(args, [r for r in records if r["isa"] != "plan"])  # what a user's run costs: session.run
    return 0


def _batches(text, default) -> list:
    """--batch: comma-separated batch sizes (default: ``default``)."""
    try:
        batches = [int(b) for b in text.split(",") if b.strip()] if text else list(default)
    except ValueError:
        raise SystemExit(f"--batch takes comma-separated batch sizes, got {text!r}") from None
    if not batches or min(batches) < 1:
        raise SystemExit(f"--batch takes positive batch sizes, got {text!r}")
    return batches


def bench_fused(args, threads) -> int:
    """QConv2d's fused pooling / pixel shuffle vs the unfused sequences (--op fused)."""
    from nnkern.bench import conv, fused
    cases = fused.select(args.shapes, args.quick)
    isa = args.isa.split(",")[-1] if args.isa else conv.QCONV.default_isa()
    print_info()
    results, notes = fused.run(cases, threads, isa=isa, repeats=args.repeats, libraries=_libraries(args),
                               progress=lambda s: print(s, flush=True))
    print()
    for t in threads:
        print(fused.markdown_table(results, t, notes, isa))
        print()
    return _json(args, results)


def _write_json(args, records) -> None:
    """--json FILE: the records, each with the CPU and the date it was measured on (tools/performance_page.py
    renders them as docs/performance.md)."""
    if not args.json:
        return
    import datetime
    import json
    from nnkern.bench import harness
    stamp = {"cpu": harness.cpu_label(), "date": datetime.date.today().isoformat()}
    with open(args.json, "w") as f:
        json.dump([{**r, **stamp} for r in records], f, indent=1)
    print(f"results written to {args.json}")


def _json(args, results) -> int:
    """--json FILE: the results as records."""
    _write_json(args, [r.as_dict() for r in results])
    return 0


def _libraries(args):
    """--libraries: None (all installed), [] for 'none', else the names given."""
    if not args.libraries:
        return None
    names = [n.strip() for n in args.libraries.split(",") if n.strip()]
    return [] if names == ["none"] else names


def _print_scaling(results, threads, op) -> None:
    """The speed-up of each thread count over the smallest one, when several were run."""
    from nnkern.bench import harness
    for t in threads[1:]:
        table = harness.scaling_table(results, t, threads[0], op=op)
        if table:
            print(table)
            print()


def _plot(args, make_charts) -> None:
    """--plot FILE: the charts of the tables just printed."""
    if args.plot:
        from nnkern.bench import plot
        plot.save(make_charts(plot), args.plot)
        print(f"charts written to {args.plot}")


def bench(args) -> int:
    from nnkern.bench import harness, ops
    import nnkern
    if args.plot:
        from nnkern.bench import plot
        plot.require_matplotlib()  # before the benchmark, not after it
    if args.model:
        return bench_model(args, [int(t) for t in (args.threads or "1,2").split(",") if t.strip()])
    if args.op in ("sigmoid", "tanh", "topk"):
        return bench_elementwise(args)
    if args.op == "lstm":
        return bench_lstm(args)
    threads = [int(t) for t in (args.threads or "1,2").split(",") if t.strip()]
    if args.op in ("qconv", "conv"):
        from nnkern.bench import conv, fconv
        return bench_conv(args, threads, conv.QCONV if args.op == "qconv" else fconv.CONV)
    if args.op in ("networks", "yolo", "mobilenet", "qnet", "espcn"):
        return bench_networks(args, threads)
    if args.profile or args.memory:
        raise SystemExit("--profile and --memory are reports of --op networks")
    if args.op == "fused":
        return bench_fused(args, threads)
    if args.op == "overhead":
        return bench_overhead(args)
    if args.op not in ("sgemm", "linear", "bf16"):
        return bench_int8(args, threads)
    if args.shapes:
        shapes = [harness.parse_shape(s) for s in args.shapes]
    else:
        shapes = harness.SGEMM_QUICK if args.quick else harness.SGEMM_SHAPES
    # bf16: a column per distinct bf16 kernel (the fallbacks, vdpbf16ps, the AMX tiles), not per FP32 GEMM kernel
    isas = args.isa.split(",") if args.isa else harness.bench_isas("bf16_gemm") if args.op == "bf16" else None
    print_info()
    print(ops.openblas_note())
    print(harness.peaks_line("f32", "GFLOP/s"))
    op = {"sgemm": lambda: ops.sgemm_op(numpy_unset=not args.no_subprocess), "linear": ops.linear_op,
          "bf16": ops.bf16_op}[args.op]()
    t0 = time.perf_counter()
    results = harness.run(op, shapes, threads, isas=isas, repeats=args.repeats,
                          libraries=_libraries(args), progress=lambda s: print(s, flush=True))
    print(f"\n({time.perf_counter() - t0:.0f} s; nnkern kernels: {nnkern.cpu_info()['kernels']})\n")
    for t in threads:
        print(harness.markdown_table(results, t))
        print()
    _print_scaling(results, threads, op.name)
    print(harness.peaks_line("f32", "GFLOP/s"))
    print(ops.openblas_note())
    _plot(args, lambda plot: plot.from_results(results, threads, sorted({r.op for r in results})))
    return _json(args, results)


def run_model(args) -> int:
    """python -m nnkern run MODEL.onnx: the outputs' shapes and statistics, the latency and the plan."""
    try:
        import nnkern.onnx
        from nnkern.onnx import _tool
    except ImportError as e:
        raise SystemExit(str(e))
    dims = _tool.parse_assignments(args.dim, "--dim")
    files = _tool.parse_assignments(args.input, "--input")
    kwargs = {"num_threads": args.threads} if args.threads else {}
    session = nnkern.onnx.InferenceSession(args.model, **kwargs)
    feeds = _tool.load_feeds(session, files, dims, seed=args.seed, batch=args.batch)
    defaulted = _tool.defaulted_dims(session, dims, args.batch)
    if defaulted:
        print(f"symbolic dimensions set to 1: {', '.join(defaulted)} (give them with --dim NAME=VALUE)")
    for name, a in feeds.items():
        print("input  " + _tool.summary(name, a))
    outputs = session.run(None, feeds)  # compiles the plan for these shapes, then runs once
    for o, a in zip(session.get_outputs(), outputs):
        print("output " + _tool.summary(o.name, a))
    times = []
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"latency: median {times[len(times) // 2] * 1e3:.3f} ms, best {times[0] * 1e3:.3f} ms over {len(times)} "
          f"runs, {session._options['num_threads'] or nnkern.get_num_threads()} thread(s)")
    print()
    print(session.describe(feeds))
    if args.profile:
        print()
        print(session.profile(feeds, repeats=max(1, args.repeats)))
    return 0


def bench_model(args, threads) -> int:
    """python -m nnkern bench --model MODEL.onnx: nnkern vs onnxruntime on the same inputs."""
    from nnkern.bench import model
    from nnkern.onnx import _tool
    dims = _tool.parse_assignments(args.dim, "--dim")
    files = _tool.parse_assignments(args.input, "--input")
    batch = _batches(args.batch, ()) if args.batch else [None]
    if len(batch) != 1:
        raise SystemExit("bench --model: --batch takes one batch size")
    print_info()
    results, diffs = model.run(args.model, model.feeds_factory(files, dims, batch[0]), threads,
                               repeats=args.repeats, libraries=_libraries(args), name=model.model_name(args.model),
                               progress=lambda s: print(s, flush=True))
    print()
    print(model.table(results))
    if diffs:
        print()
        for name, abs_diff, rel_diff in diffs:
            print(f"output {name}: max |nnkern - onnxruntime| = {abs_diff:.3g} ({rel_diff:.3g} of max |onnxruntime|)")
    return _json(args, results)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnkern", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"nnkern {_version()}")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("info", help="CPU, features, caches and the chosen kernels")
    sub.add_parser("check", help="self-check of every kernel this CPU can run (exit 1 on FAIL)")
    b = sub.add_parser("bench", help="SGEMM table vs every installed comparison library")
    b.add_argument("--op", default="sgemm",
                   choices=["sgemm", "linear", "bf16", "qgemm", "qlinear", "int8", "qconv", "conv", "networks", "yolo",
                            "mobilenet", "qnet", "sigmoid", "tanh", "topk", "lstm", "fused", "espcn", "overhead"],
                   help="sgemm (default; B per call, as every comparison library); linear (FP32 Linear, weights "
                        "prepacked, vs onnxruntime with B an initializer and the others); bf16 (Linear at float32 "
                        "precision 'medium': bf16 products, vs nnkern's float32 Linear and torch's bf16 tensors and "
                        "'medium' matmul precision); qgemm (int8, B packed per "
                        "call, vs libraries taking B per call), qlinear (prepacked, fused "
                        "requantization) or int8 (both); sigmoid/tanh/topk (1 thread; --shapes = element counts); "
                        "lstm (--shapes = hidden,batch; seq 50); qconv (QConv2d on ResNet-50 / MobileNet-v2 layers, "
                        "batch 1; --shapes = parts of layer names, e.g. rn50.s2 dw); conv (FP32 Conv2d per "
                        "algorithm on ResNet-50 / MobileNet-v2 / YoloV3-Tiny / VGG-16 / low-OC layers, batch 1 or "
                        "--batch; --shapes as "
                        "qconv, e.g. yolo.3x3 lowoc); networks (whole networks exported from their torch "
                        "definitions through nnkern.onnx vs onnxruntime and torch, float and INT8 QDQ, --batch 1,8 by "
                        "default; --shapes = network names, float / int8 and an input size, e.g. resnet18 int8 112; "
                        "--quick: the small test-size networks); yolo, mobilenet, qnet, espcn (networks: YOLOv3-tiny "
                        "float, MobileNet-v2 float, ResNet-18 and MobileNet-v2 INT8, ESPCN INT8); fused (QConv2d's "
                        "fused global average pooling / pixel shuffle vs conv + numpy / avg_pool2d / pixel_shuffle and "
                        "torch; --shapes = parts of case names, e.g. gap ps4); overhead (the per-step cost of an ONNX plan: chains of "
                        "cheap nodes through nnkern.onnx and onnxruntime)")
    b.add_argument("--threads", default=None, help="comma-separated thread counts (default 1,2; lstm: 1)")
    b.add_argument("--shapes", nargs="+", metavar="M,N,K", help="shapes (M,N,K or MxNxK); default: the list")
    b.add_argument("--quick", action="store_true", help="a short shape list and 5 repetitions")
    b.add_argument("--isa", help="comma-separated nnkern ISA levels (default: all this CPU runs)")
    b.add_argument("--repeats", type=int, default=None, help="repetitions per shape (default 7, quick 5)")
    b.add_argument("--libraries", help="comma-separated comparison libraries to run (default: all installed; "
                   "'none': nnkern alone, e.g. to measure its thread scaling without other pools' spinning)")
    b.add_argument("--no-subprocess", action="store_true", help="skip numpy with OPENBLAS_* unset")
    b.add_argument("--json", help="also write the result records to this file")
    b.add_argument("--plot", metavar="FILE.png", help="also draw one bar chart per table into this image "
                                                      "(needs matplotlib: pip install 'nnkern[plot]')")
    b.add_argument("--profile", action="store_true", help="--op networks: also nnkern's time by op kind per network, "
                   "precision and thread count at batch 1, before (optimize=False: each node as written) and after "
                   "(optimize=True) the plan's optimizations, one table each (records: op networks-profile)")
    b.add_argument("--memory", action="store_true", help="--op networks: also the peak resident memory growth "
                   "(VmHWM; ru_maxrss without /proc) of creating a session and running it once, nnkern and "
                   "onnxruntime each in a fresh process, per network, precision, batch and thread count, with "
                   "nnkern's planned intermediates (records: op networks-memory)")
    b.add_argument("--high", action="store_true", help="--op networks: also run each float network at float32 "
                   "precision 'high' (Winograd for its 3x3 stride-1 convolutions), nnkern's rows marked (high)")
    b.add_argument("--medium", action="store_true", help="--op networks: also run each float network at float32 "
                   "precision 'medium' (bf16 products in its convolutions and matrix products), rows marked (medium)")
    b.add_argument("--model", metavar="MODEL.onnx", help="time a whole ONNX model against onnxruntime (all graph "
                   "optimizations, the same thread counts) on the same inputs, and compare the outputs")
    r = sub.add_parser("run", help="run an ONNX model: outputs, latency and the compiled plan")
    r.add_argument("model", metavar="MODEL.onnx")
    r.add_argument("--threads", type=int, default=None, help="threads for the session (default: the pool's)")
    r.add_argument("--repeats", type=int, default=10, help="timed runs after the first (default 10)")
    r.add_argument("--profile", action="store_true", help="also print the time per op kind")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    for q in (r, b):
        q.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input from a .npy file "
                       "(repeatable); the others are random of the declared shape")
        q.add_argument("--dim", action="append", metavar="NAME=VALUE", help="the value of a symbolic dimension "
                       "(repeatable; default: --batch for the first, 1 for the others)")
    r.add_argument("--batch", type=int, default=None, help="the first dimension of inputs that declare it symbolic")
    b.add_argument("--batch", default=None, help="comma-separated batch sizes of --op networks (default 1,8) and "
                   "--op qconv / conv (default 1); with "
                   "--model one size, the first dimension of inputs that declare it symbolic")
    args = p.parse_args(argv)
    if args.cmd == "info":
        print_info()
        return 0
    if args.cmd == "check":
        return 0 if run_check() else 1
    if args.cmd == "bench":
        if args.repeats is None:
            args.repeats = 5 if args.quick else 7
        return bench(args)
    if args.cmd == "run":
        return run_model(args)
    return main_job()


if __name__ == "__main__":
    sys.exit(main())
