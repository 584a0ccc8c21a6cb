"""Writes the test models of tests/onnx_models.py as .onnx files, for benchmarks and the command line.

    python tools/onnx_models.py OUTDIR [--only NAME ...] [--no-int8] [--full-range] [--ops]

For each model NAME: OUTDIR/NAME.onnx (float), NAME.qdq.onnx and NAME.qoperator.onnx (INT8, onnxruntime's static
quantization; weights in [-64, 63] unless --full-range), and OUTDIR/models.json: per file its inputs (name, type,
shape with symbolic dimensions as strings), an example input shape, the default and second size the model takes,
and its operators. --ops prints each file's operators. The torch-exported models are left out, with a note, where
torch is missing.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import onnx  # noqa: E402
from onnx_models import MODELS, QUANT_KINDS, op_types, quantize  # noqa: E402


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401 (only whether it imports)
    except Exception:  # a missing or broken torch
        return False
    return True


def _inputs(model: onnx.ModelProto) -> list:
    out = []
    for i in model.graph.input:
        t = i.type.tensor_type
        dims = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
        out.append(dict(name=i.name, type=onnx.TensorProto.DataType.Name(t.elem_type).lower(), shape=dims))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=pathlib.Path)
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(MODELS), help="these models only")
    parser.add_argument("--no-int8", action="store_true", help="the float models only")
    parser.add_argument("--full-range", action="store_true", help="INT8 weights over [-127, 127], not [-64, 63]")
    parser.add_argument("--ops", action="store_true", help="print each file's operators")
    args = parser.parse_args(argv)

    args.outdir.mkdir(parents=True, exist_ok=True)
    has_torch = _torch_available()
    index = {}
    for name in args.only or MODELS:
        builder, feeds, needs_torch = MODELS[name]
        if needs_torch and not has_torch:
            print(f"{name}: skipped (needs torch)")
            continue
        model = builder()
        versions = {name: model}
        if not args.no_int8:
            for kind in QUANT_KINDS:
                versions[f"{name}.{kind}"] = quantize(model, kind, feeds, reduce_range=not args.full_range)
        example = {k: list(v.shape) for k, v in feeds(batch=1).items()}
        for stem, m in versions.items():
            path = args.outdir / f"{stem}.onnx"
            onnx.save(m, str(path))
            ops = op_types(m)
            index[path.name] = dict(model=name, inputs=_inputs(m), example_shapes=example, size=feeds.size or None,
                                    alt_size=feeds.alt_size, ops=ops)
            print(f"{path}: {len(m.graph.node)} nodes, {path.stat().st_size / 1e6:.2f} MB"
                  + (f"\n    ops: {', '.join(ops)}" if args.ops else ""))
    (args.outdir / "models.json").write_text(json.dumps(index, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
