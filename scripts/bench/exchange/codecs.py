"""Codec kernels' compress + decompress throughput against a plain memory copy, in one run.

    python scripts/bench/exchange/codecs.py [--n 5000000] [--repeat 15] [--json out.json]
    python scripts/bench/exchange/codecs.py --frames mlp:128@signal:2000,64,20  # a frame's bytes

Throughput counts the float32 bytes of the vector (4 n) per second of encode + decode; the
copy is `np.copyto` of the same 4 n bytes into a preallocated buffer, timed in the same run
before and after the codecs (best of both: the ratio is against the fastest copy the run saw),
so the ratio holds on a loaded machine too. int8 is timed with each CPU kernel in the same run:
the fused C one where it was built (kernels/int8_native.py; on x86-64 its AVX2 copy, which the
codec uses, and its baseline SSE2 copy) and the numpy one. Everything runs on one thread (the
copy, the C loops, numpy's passes and NumKong's casts alike).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from swarmnode.kernels import compress, int8_native, lowrank, topk2


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def int8_c_copy(isa: str) -> tuple[Callable, Callable]:
    """encode, decode through one ISA copy of the C kernel's loops (not the default one)."""

    def enc(x: np.ndarray) -> compress.Packed:
        q, scales = np.empty(x.size, np.int8), np.empty(-(-x.size // 256), np.float32)
        int8_native.encode_into(x, 256, scales, q, isa)
        return compress.Packed("int8", x.size, {"scales": scales, "q": q}, block=256)

    def dec(p: compress.Packed, out: np.ndarray) -> np.ndarray:
        int8_native.decode_into(p.parts["q"], p.parts["scales"], 256, out, isa)
        return out

    return enc, dec


def cases() -> list[tuple[str, Callable, Callable]]:
    """(row name, encode(x), decode(packed, out)) for each codec and int8 kernel: the C one as
    the codec runs it (its best ISA copy), its baseline copy where that is another, numpy's."""
    rows: list[tuple[str, Callable, Callable]] = [
        ("fp16", compress.fp16_encode, compress.fp16_decode)
    ]
    isas = int8_native.isas()
    if isas:
        rows.append(
            (
                f"int8 (c {isas[-1]})",
                lambda x: compress.int8_encode(x, kernel="c"),
                lambda p, out: compress.int8_decode(p, out, kernel="c"),
            )
        )
    if len(isas) > 1:
        rows.append((f"int8 (c {isas[0]})", *int8_c_copy(isas[0])))
    rows.append(
        (
            "int8 (numpy)",
            lambda x: compress.int8_encode(x, kernel="numpy"),
            lambda p, out: compress.int8_decode(p, out, kernel="numpy"),
        )
    )
    rows.append(("topk:0.01", lambda x: compress.topk_encode(x, 0.01), compress.topk_decode))
    rows.append(("topk2:0.07", lambda x: compress.encode(x, "topk2", 0.07), topk2.decode))
    rows.append(("lowrank:8", _lowrank_encode, lowrank.decode))
    return rows


FRAME_CODECS = ("none", "fp16", "int8", "topk:0.01", "topk2:0.03", "topk2:0.07", "lowrank:8")


def frame_bytes(model: str, data: str) -> dict[str, int]:
    """Bytes of one delta frame (header included, as `encode_packed` writes it) per codec, for
    the model `model` on `data`'s shapes: a trained step's difference (random here: the sizes
    do not depend on the values), lowrank on the model's own matrices."""
    from swarmnode.gossip.wire import encode_packed, encode_params
    from swarmnode.kernels.backend import select_backend
    from swarmnode.node.train.data.datasets import load_dataset
    from swarmnode.node.train.model.builtin import build_model

    d = load_dataset(data)
    net = build_model(model, d.input_shape, d.n_classes, select_backend("cpu"), 0)
    shapes = [tuple(v.shape) for v in net.params.views.values()]
    segs = lowrank.segments(shapes)
    x = np.random.default_rng(0).standard_normal(net.params.data.size).astype(np.float32)
    extra = {"ref": "delta", "ref_epoch": 2**61, "ref_ver": 7, "mix": 0.25}  # a delta's fields
    out = {}
    for spec in FRAME_CODECS:
        if spec == "none":
            out[spec] = len(encode_params(x, sender="p" * 16, step=10**6))
            continue
        name, ratio = compress.parse_codec(spec)
        packed = compress.encode(x, name, ratio, segs=segs)
        out[spec] = len(encode_packed(packed, sender="p" * 16, step=10**6, extra=extra))
    return out


def print_frames(models: list[str]) -> None:
    for spec in models:
        model, _, data = spec.partition("@")
        sizes = frame_bytes(model, data)
        print(f"\n{model} on {data}: {sizes['none']:,} bytes whole")
        for codec, nbytes in sizes.items():
            print(f"  {codec:12s} {nbytes:>12,} bytes  {sizes['none'] / nbytes:7.1f}x fewer")


def _lowrank_encode(x: np.ndarray) -> compress.Packed:
    """lowrank:8 of x read as a 2048-row matrix (the lab MLP's big layer is 2048 x 2400) and
    the rest as a bias, from a cold start (a warm one costs the same)."""
    segs = (
        ((2048, x.size // 2048), (1, x.size % 2048)) if x.size % 2048 else ((2048, x.size // 2048),)
    )
    return compress.encode(x, "lowrank", 8, segs=segs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--frames",
        nargs="*",
        metavar="MODEL@DATA",
        help="print one delta frame's bytes per codec for these models and stop, e.g. "
        "mlp:128@signal:2000,64,20 mlp:2048,2400@signal:4000,64,20",
    )
    args = ap.parse_args()
    if args.frames:
        print_frames(args.frames)
        return
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    dst = np.empty_like(x)
    gb = x.nbytes / 1e9
    copy_s = best(lambda: np.copyto(dst, x), args.repeat)
    rows: dict[str, float | str] = {"int8 C kernel": int8_native.status()}
    for name, enc, dec in cases():
        packed = enc(x)
        enc_s = best(lambda e=enc: e(x), args.repeat)
        dec_s = best(lambda d=dec, p=packed: d(p, dst), args.repeat)
        rows[name] = gb / (enc_s + dec_s)
        rows[name + " bytes/value"] = packed.nbytes / args.n
        rows[name + " encode/decode ms"] = f"{enc_s * 1e3:.2f}/{dec_s * 1e3:.2f}"
    copy_s = min(copy_s, best(lambda: np.copyto(dst, x), args.repeat))
    rows["copy"] = gb / copy_s
    print(f"n = {args.n:,} float32 ({gb * 1000:.0f} MB); int8 C kernel: {rows['int8 C kernel']}")
    for name, _, _ in cases():
        share = rows[name] / rows["copy"]
        print(
            f"{name:18s} {rows[name]:6.2f} GB/s  {share:6.1%} of copy  "
            f"{rows[name + ' bytes/value']:.3f} bytes/value  "
            f"encode/decode {rows[name + ' encode/decode ms']} ms"
        )
    print(f"{'copy':18s} {rows['copy']:6.2f} GB/s  {gb / rows['copy'] * 1e3:.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
