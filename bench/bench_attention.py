"""Forward attention throughput: fa's generated kernels against PyTorch SDPA
(FlashAttention-2 and cuDNN backends) in the same run, FlashAttention's
benchmark convention: B*S = 16384 tokens, H*D = 2048, FLOPs = 4*B*H*S*S*D
(halved for causal).

    python3 bench/bench_attention.py [--quick] [--json out.json]
        [--dtypes float16,bfloat16] [--dims 64,128,256] [--seqs 1024,4096]
        [--simt] [--f32] [--timing call|kernel] [--host-overhead]

--timing call (default): median time of one call with
triton.testing.do_bench (CUDA events around each call after an L2 flush;
host work of a call that outlasts the flush counts). --timing kernel: the
device time of the kernels one call launches (torch.profiler/CUPTI, mean
over 20 calls, L2 warm from the previous call), the same measure for every
implementation. --host-overhead prints the CPU time per call (no sync) of
each implementation on the D=128, S=4k problem and exits.

Per row: fa on the tensor-core strategy (mma, the default for 16-bit
inputs), SDPA FLASH_ATTENTION and CUDNN_ATTENTION on the same inputs, and
the ratios fa/flash and fa/cuDNN; on sm_90 devices also fa's Hopper strategy
(wgmma) and its ratios (--no-wgmma skips it). --simt adds fa's CUDA-core strategy on the
same 16-bit inputs; --f32 adds fa f32 (simt) and SDPA's float32 peer (the
memory-efficient backend). --fp8 adds, on sm_90 devices at head dims in
multiples of 64, fa's FP8 forward on the same inputs quantized to
float8_e4m3fn (fa.fp8.quantize, outside the timing; bf16 O) and its ratios
to fa wgmma and cuDNN on the 16-bit inputs.
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402

try:
    from triton.testing import do_bench
except ImportError:  # pragma: no cover
    def do_bench(fn, warmup=25, rep=100):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        times = []
        for _ in range(10):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]


TIMING = "call"


def kernel_ms(fn, iters=20):
    """The summed device time of the kernels launched by `iters` calls
    (CUPTI through torch.profiler), per call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    us = sum(e.device_time for e in prof.events()
             if e.device_type == torch.autograd.DeviceType.CUDA)
    return us / 1e3 / iters or None


def bench(fn):
    return kernel_ms(fn) if TIMING == "kernel" else do_bench(fn)


def host_overhead(calls=200):
    """CPU microseconds per call, no synchronization in between (the GPU
    queue absorbs the kernels), D=128, S=4k, B=4, fp16."""
    import time
    q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda",
                           dtype=torch.float16) for _ in range(3))
    impls = {
        "fa wgmma": lambda: fa.attention(q, k, v, strategy="wgmma"),
        "fa mma": lambda: fa.attention(q, k, v, strategy="mma"),
        "fa _forward wgmma": lambda: fa._forward(q, k, v, False, 0.0, 0, 0,
                                                 0, "wgmma", 0),
        "fa _forward mma": lambda: fa._forward(q, k, v, False, 0.0, 0, 0, 0,
                                               "mma", 0),
    }
    for name, backend in (("sdpa flash", SDPBackend.FLASH_ATTENTION),
                          ("sdpa cudnn", SDPBackend.CUDNN_ATTENTION)):
        def run(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        impls[name] = run
    encode = tensor_map_encoder(q)
    if encode:
        impls["1 tensor map"] = encode
    for name, fn in impls.items():
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        host = (time.perf_counter() - start) / calls * 1e6
        torch.cuda.synchronize()
        print(f"{name:>14}: {host:7.1f} us of CPU per call")


def tensor_map_encoder(t):
    """A call of the driver's cuTensorMapEncodeTiled for a [B, H, S, D]
    fp16 tensor as the wgmma launches encode it (128 x 64 boxes, 128-byte
    swizzle), through ctypes; None where libcuda has no such entry."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        fn = cuda.cuTensorMapEncodeTiled
    except (OSError, AttributeError):
        return None
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    dims = (u64 * 4)(*reversed(t.shape))
    strides = (u64 * 3)(*(t.stride(i) * 2 for i in (2, 1, 0)))
    box, ones = (u32 * 4)(64, 128, 1, 1), (u32 * 4)(1, 1, 1, 1)
    out = ctypes.create_string_buffer(128 + 64)
    # CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6, INTERLEAVE_NONE = 0,
    # SWIZZLE_128B = 3, L2_PROMOTION_L2_256B = 3, FLOAT_OOB_FILL_NONE = 0.
    address = ctypes.addressof(out) + (-ctypes.addressof(out)) % 64

    # `run` names `out` so that the buffer lives as long as the closure: the
    # address alone would let it be freed, and each call would then write
    # 128 bytes into freed memory (a crash at interpreter exit).
    def run(storage=out):
        status = fn(ctypes.c_void_p(address), 6, 4,
                    ctypes.c_void_p(t.data_ptr()), dims, strides, box, ones,
                    0, 3, 3, 0)
        assert status == 0, status
    return run


def tflops(b, h, s, d, causal, ms):
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    return flops / (ms * 1e-3) / 1e12


def fa_ms(q, k, v, causal, args, strategy="auto"):
    """Median ms of fa.attention with the command line's tiles (0 = default)."""
    def run():
        return fa.attention(q, k, v, causal=causal, block_m=args.block_m,
                            block_n=args.block_n, num_warps=args.num_warps,
                            stages=args.stages, strategy=strategy)
    try:
        run()  # compile outside the timing
    except fa.FaError as error:  # e.g. explicit tiles this strategy rejects
        print(f"  fa {strategy}: {error}")
        return None
    return bench(run)


def fa_fp8_ms(q, k, v, causal, args):
    """Median ms of fa's FP8 forward on q, k, v quantized to e4m3."""
    q8, k8, v8, descales = fa.fp8.quantize(q, k, v)

    def run():
        return fa.attention(q8, k8, v8, causal=causal, block_m=args.block_m,
                            block_n=args.block_n, num_warps=args.num_warps,
                            stages=args.stages, **descales)
    try:
        run()
    except fa.FaError as error:
        print(f"  fa fp8: {error}")
        return None
    return bench(run)


def sdpa(backend, q, k, v, causal):
    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        run()
        return bench(run)
    except RuntimeError:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--dims", default="64,128,256")
    parser.add_argument("--seqs", default="")
    parser.add_argument("--simt", action="store_true")
    parser.add_argument("--no-wgmma", action="store_true",
                        help="skip fa's Hopper strategy (it runs by default "
                             "on sm_90 devices)")
    parser.add_argument("--f32", action="store_true")
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--block-m", type=int, default=0)
    parser.add_argument("--block-n", type=int, default=0)
    parser.add_argument("--num-warps", type=int, default=0)
    parser.add_argument("--stages", type=int, default=0)
    parser.add_argument("--timing", choices=("call", "kernel"),
                        default="call")
    parser.add_argument("--host-overhead", action="store_true")
    args = parser.parse_args()
    global TIMING
    TIMING = args.timing
    if args.host_overhead:
        host_overhead()
        return
    if args.seqs:
        seqs = [int(s) for s in args.seqs.split(",")]
    else:
        seqs = [1024, 4096] if args.quick else [512, 1024, 2048, 4096, 8192,
                                                16384]
    wgmma = (not args.no_wgmma
             and torch.cuda.get_device_capability() == (9, 0))
    rows = []
    fmt = lambda x: f"{x:7.1f}" if x else "    n/a"  # noqa: E731
    print(f"{'dtype':>8} {'D':>4} {'S':>6} {'causal':>6} | {'fa mma':>7} "
          f"{'flash':>7} {'cudnn':>7} | {'/flash':>6} {'/cudnn':>6} | "
          f"{'wgmma':>7} {'/flash':>6} {'/cudnn':>6} | "
          f"{'fa simt':>7} {'fa f32':>7} {'sdpa32':>7}  (TFLOP/s)")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for d in (int(x) for x in args.dims.split(",")):
            h = 2048 // d
            for s in seqs:
                b = max(1, 16384 // s)
                for causal in (False, True):
                    q, k, v = (torch.randn(b, h, s, d, device="cuda",
                                           dtype=dtype) for _ in range(3))
                    rate = lambda ms: ms and tflops(b, h, s, d, causal, ms)  # noqa: E731
                    row = {"dtype": dtype_name, "D": d, "S": s, "B": b, "H": h,
                           "causal": causal, "timing": TIMING,
                           "fa_mma": rate(fa_ms(q, k, v, causal, args,
                                                "mma")),
                           "sdpa_flash": rate(sdpa(SDPBackend.FLASH_ATTENTION,
                                                   q, k, v, causal)),
                           "sdpa_cudnn": rate(sdpa(SDPBackend.CUDNN_ATTENTION,
                                                   q, k, v, causal))}
                    if wgmma:
                        row["fa_wgmma"] = rate(fa_ms(q, k, v, causal, args,
                                                     "wgmma"))
                    if args.simt:
                        row["fa_simt"] = rate(fa_ms(q, k, v, causal, args,
                                                    "simt"))
                    if args.f32:
                        q32, k32, v32 = q.float(), k.float(), v.float()
                        row["fa_f32"] = rate(fa_ms(q32, k32, v32, causal, args))
                        row["sdpa_efficient_f32"] = rate(sdpa(
                            SDPBackend.EFFICIENT_ATTENTION, q32, k32, v32,
                            causal))
                        del q32, k32, v32
                    if args.fp8 and wgmma and d % 64 == 0:
                        row["fa_fp8"] = rate(fa_fp8_ms(q, k, v, causal, args))
                    rows.append(row)
                    def ratio(x, key="fa_mma"):
                        return (f"{row[key] / x:6.3f}" if x and row.get(key)
                                else "   n/a")
                    print(f"{dtype_name:>8} {d:>4} {s:>6} {str(causal):>6} | "
                          f"{fmt(row['fa_mma'])} {fmt(row['sdpa_flash'])} "
                          f"{fmt(row['sdpa_cudnn'])} | "
                          f"{ratio(row['sdpa_flash'])} {ratio(row['sdpa_cudnn'])} | "
                          f"{fmt(row.get('fa_wgmma'))} "
                          f"{ratio(row['sdpa_flash'], 'fa_wgmma')} "
                          f"{ratio(row['sdpa_cudnn'], 'fa_wgmma')} | "
                          f"{fmt(row.get('fa_simt'))} {fmt(row.get('fa_f32'))} "
                          f"{fmt(row.get('sdpa_efficient_f32'))}"
                          + (f" | fp8 {fmt(row.get('fa_fp8'))} "
                             f"{ratio(row.get('fa_wgmma'), 'fa_fp8')} /wgmma "
                             f"{ratio(row['sdpa_cudnn'], 'fa_fp8')} /cudnn"
                             if "fa_fp8" in row else ""), flush=True)
                    del q, k, v
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
