"""Minimal Hopper kernels, one feature each, to tell a synchronization
defect of fa's wgmma kernels from a limit of compute-sanitizer's synccheck
(issue 27's defect 8: every wgmma kernel ends in a launch failure or in
wrong values under `--tool synccheck`, and is correct without it).

Each probe is a hand-written PTX kernel whose result is known exactly; it
is loaded through the CUDA driver (ctypes, no toolkit) and checked. Run a
probe alone, then the same probe under the tool:

    python3 scripts/synccheck_probe.py PROBE
    compute-sanitizer --tool synccheck python3 scripts/synccheck_probe.py PROBE

PROBE: mbarrier (init, arrive, try_wait), mbarrier_hint (try_wait with a
suspend-time hint), bulk (a cp.async.bulk copy that
completes on an mbarrier), wgmma (one m64n8k16 from shared-memory
descriptors over a tile of ones: every result is 16), wgmma_rega (A in
registers), wgmma_bulk (the
same tile copied in by cp.async.bulk), tma_param and tma_global (a TMA
tensor copy, its tensor map a kernel parameter as in fa's kernels, or in
global memory), tma_oob (a box partly out of bounds), ws_ring (a warp-specialized ring: one producer thread
copying 8 tiles through 2 slots for two consumer warpgroups, with
setmaxnreg and the producer warpgroup's other threads exiting), named
(named barriers of one
warpgroup and of two), setmaxnreg (two warpgroups move registers between
them), or all (each in a child process). Prints "PROBE: ok", "PROBE: wrong (...)" or "PROBE: error (...)"
and exits non-zero unless ok.
"""

import ctypes
import struct
import subprocess
import sys

HEADER = ".version 8.1\n.target sm_90a\n.address_size 64\n"

# The mbarrier probe (mbarrier_hint: the wait with a suspend-time hint).
MBARRIER = r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INITED;
  mbarrier.init.shared::cta.b64 [bar], 128;
INITED:
  bar.sync 0;
  mbarrier.arrive.shared::cta.b64 %rd1, [bar];
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
  @!%p2 bra WAIT;
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  mov.b32 %r2, 1;
  st.global.u32 [%rd5], %r2;
  ret;
}
"""

# The wgmma probes' product: one m64n8k16 over the tile at %r2 (f16 ones)
# through two descriptors (no swizzle, leading byte offset 128, stride byte
# offset 256: every address stays inside the tile): D = 16 everywhere; each
# thread stores its 4 results.
WGMMA_PRODUCT = r"""  cvt.u64.u32 %rd1, %r2;
  and.b64 %rd2, %rd1, 262143;
  shr.u64 %rd3, %rd2, 4;
  or.b64 %rd4, %rd3, 524288;
  or.b64 %rd5, %rd4, 68719476736;
  mov.b32 %r6, 0;
  setp.ne.b32 %p3, %r6, 0;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd5, %rd5, %p3, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ld.param.u64 %rd6, [out];
  cvta.to.global.u64 %rd7, %rd6;
  mul.wide.u32 %rd8, %r1, 16;
  add.s64 %rd9, %rd7, %rd8;
  st.global.v4.f32 [%rd9], {%f1, %f2, %f3, %f4};
  ret;
}
"""

# The tile of ones written by every thread (st.shared), fenced for the
# async proxy.
WGMMA_FILLED = r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
{
  .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .f32 %f<8>; .reg .pred %p<4>;
  .shared .align 1024 .b8 tile[4096];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, tile;
  shl.b32 %r3, %r1, 5;
  add.u32 %r4, %r2, %r3;
  mov.b32 %r5, 0x3C003C00;
  st.shared.v4.b32 [%r4], {%r5, %r5, %r5, %r5};
  st.shared.v4.b32 [%r4+16], {%r5, %r5, %r5, %r5};
  fence.proxy.async.shared::cta;
  bar.sync 0;
""" + WGMMA_PRODUCT

# A TMA tensor copy of a 32 x 32 u32 tile into shared memory, each thread
# storing 8 words of it back; ENTRY declares the tensor map parameter and
# MAP makes %rd2 its address.
TMA = r"""
ENTRY
{
  .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .pred %p<4>;
  .shared .align 1024 .b8 tile[4096];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INITED;
  mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
INITED:
  bar.sync 0;
  @%p1 bra ISSUED;
MAP
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], 4096;
  mov.b32 %r9, 0;
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [tile], [%rd2, {%r9, %r9}], [bar];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
  @!%p2 bra WAIT;
  mov.u32 %r2, tile;
  shl.b32 %r3, %r1, 5;
  add.u32 %r4, %r2, %r3;
  ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [%r4];
  ld.param.u64 %rd4, [out];
  cvta.to.global.u64 %rd5, %rd4;
  mul.wide.u32 %rd6, %r1, 32;
  add.s64 %rd7, %rd5, %rd6;
  st.global.v4.u32 [%rd7], {%r5, %r6, %r7, %r8};
  ld.shared.v4.u32 {%r5, %r6, %r7, %r8}, [%r4+16];
  st.global.v4.u32 [%rd7+16], {%r5, %r6, %r7, %r8};
  ret;
}
"""
TMA_MAP_PARAM = (
    ".visible .entry probe(.param .u64 out, .param .u64 in, .param .align 64 .b8 tmap[128])",
    "  mov.b64 %rd1, tmap;\n  cvta.param.u64 %rd2, %rd1;\n")
TMA_MAP_GLOBAL = (
    ".visible .entry probe(.param .u64 out, .param .u64 in, .param .u64 tmap)",
    "  ld.param.u64 %rd2, [tmap];\n")


def tma(map_kind):
    entry, address = map_kind
    return TMA.replace("ENTRY", entry).replace("MAP\n", address)


def bulk_copied(declarations, buffer, size):
    """The start of a probe whose thread 0 copies `size` bytes of `in` into
    the shared `buffer` with cp.async.bulk, completing on the mbarrier
    `bar` (both among `declarations`), while every thread waits for it."""
    return (r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
{
@@DECL@@  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INITED;
  mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
INITED:
  bar.sync 0;
  @%p1 bra ISSUED;
  ld.param.u64 %rd1, [in];
  cvta.to.global.u64 %rd2, %rd1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], @@SIZE@@;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [@@BUFFER@@], [%rd2], @@SIZE@@, [bar];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
  @!%p2 bra WAIT;
""".replace("@@DECL@@", declarations)
            .replace("@@BUFFER@@", buffer).replace("@@SIZE@@", str(size)))


PROBES = {
    # 128 threads arrive on one mbarrier and wait for its phase.
    "mbarrier": (128, 128, MBARRIER,
      lambda words, inputs: all(w == 1 for w in words)),
    # The same wait with a suspend-time hint (10 ms), as fa's rings wait.
    "mbarrier_hint": (128, 128, MBARRIER.replace("[bar], 0;", "[bar], 0, 10000000;"),
      lambda words, inputs: all(w == 1 for w in words)),
    # Thread 0 copies 512 bytes global -> shared with cp.async.bulk, which
    # completes the transaction on an mbarrier; every thread waits, then
    # copies its word back out.
    "bulk": (128, 128, bulk_copied(
        r"""  .reg .b32 %r<8>; .reg .b64 %rd<12>; .reg .pred %p<4>;
  .shared .align 128 .b8 buf[512];
  .shared .align 8 .b64 bar;
""", "buf", 512) + r"""  mov.u32 %r2, buf;
  shl.b32 %r3, %r1, 2;
  add.u32 %r4, %r2, %r3;
  ld.shared.u32 %r5, [%r4];
  ld.param.u64 %rd4, [out];
  cvta.to.global.u64 %rd5, %rd4;
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd5, %rd6;
  st.global.u32 [%rd7], %r5;
  ret;
}
""",
      lambda words, inputs: words == inputs),
    # A 4 KB shared tile of f16 ones, read by one wgmma m64n8k16 through
    # two descriptors (no swizzle, leading byte offset 128, stride byte
    # offset 256: every address stays inside the tile): D = 16 everywhere.
    "wgmma": (128, 512, WGMMA_FILLED,
      lambda words, inputs: all(w == 0x41800000 for w in words)),
    # The same product with A (ones) in registers, as fa's P V.
    "wgmma_rega": (128, 512, WGMMA_FILLED.replace(
         "%rd5, %rd5, %p3, 1, 1, 0, 0;",
         "{%r5, %r5, %r5, %r5}, %rd5, %p3, 1, 1, 1;"),
      lambda words, inputs: all(w == 0x41800000 for w in words)),
    # The wgmma probe with its tile of ones copied in by cp.async.bulk
    # (written and read by the async proxy, as the TMA producer's tiles).
    "wgmma_bulk": (128, 512, bulk_copied(
        r"""  .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .f32 %f<8>; .reg .pred %p<4>;
  .shared .align 1024 .b8 tile[4096];
  .shared .align 8 .b64 bar;
""", "tile", 4096) + r"""  mov.u32 %r2, tile;
""" + WGMMA_PRODUCT,
      lambda words, inputs: all(w == 0x41800000 for w in words)),
    # Named barriers with part of the block (each warpgroup its own, then
    # both), as the consumers' warpgroup-local and compute barriers.
    "named": (256, 256, r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 7;
  add.u32 %r3, %r2, 9;
  mov.u32 %r4, 0;
LOOP:
  bar.sync %r3, 128;
  add.u32 %r4, %r4, 1;
  setp.lt.u32 %p1, %r4, 8;
  @%p1 bra LOOP;
  bar.sync 8, 256;
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.global.u32 [%rd5], %r4;
  ret;
}
""",
      lambda words, inputs: all(w == 8 for w in words)),
    # A TMA tensor copy (cp.async.bulk.tensor.2d of a 32 x 32 u32 tile)
    # whose tensor map is a 64-byte aligned kernel parameter read through
    # its generic address (cvta.param), as fa's kernels pass theirs ...
    "tma_param": (128, 1024, tma(TMA_MAP_PARAM),
      lambda words, inputs: words == inputs),
    # ... and the same copy with the tensor map in global memory.
    "tma_global": (128, 1024, tma(TMA_MAP_GLOBAL),
      lambda words, inputs: words == inputs),
    # The tma_param copy of a 30 x 30 tensor: the box's last rows and
    # columns are out of bounds, filled with zeros by the engine (as the
    # tiles past a sequence's end in fa's kernels).
    "tma_oob": (128, 1024, tma(TMA_MAP_PARAM),
      lambda words, inputs: words == [
        inputs[i] if i // 32 < 30 and i % 32 < 30 else 0 for i in range(1024)]),
    # A warp-specialized ring as fa's kernels run one: 3 warpgroups; the
    # last gives registers back and one of its threads (the others exit)
    # copies 8 tiles of 1 KB with cp.async.bulk into a ring of 2 slots
    # (full barriers: the copy's bytes; empty barriers: 256 consumer
    # arrivals); the two consumer warpgroups take registers, wait for each
    # tile, add their word of it, meet at their warpgroup's named barrier
    # and release the slot. Each consumer thread writes its sum.
    "ws_ring": (384, 256, r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
.maxnreg 168
{
  .reg .b32 %r<24>; .reg .b64 %rd<16>; .reg .pred %p<8>;
  .shared .align 128 .b8 ring[2048];
  .shared .align 8 .b64 full[2];
  .shared .align 8 .b64 empty[2];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INITED;
  mbarrier.init.shared::cta.b64 [full], 1;
  mbarrier.init.shared::cta.b64 [full+8], 1;
  mbarrier.init.shared::cta.b64 [empty], 256;
  mbarrier.init.shared::cta.b64 [empty+8], 256;
  fence.mbarrier_init.release.cluster;
INITED:
  bar.sync 0;
  mov.u32 %r20, ring;
  mov.u32 %r21, full;
  mov.u32 %r22, empty;
  setp.lt.u32 %p2, %r1, 256;
  @%p2 bra CONSUMER;
  setmaxnreg.dec.sync.aligned.u32 24;
  setp.ne.u32 %p3, %r1, 256;
  @%p3 bra EXIT;
  ld.param.u64 %rd1, [in];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r2, 0;
PRODUCE:
  and.b32 %r3, %r2, 1;
  shr.u32 %r4, %r2, 1;
  and.b32 %r5, %r4, 1;
  xor.b32 %r6, %r5, 1;
  shl.b32 %r7, %r3, 3;
  add.u32 %r8, %r22, %r7;
  add.u32 %r9, %r21, %r7;
WAIT_EMPTY:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r8], %r6, 10000000;
  @!%p4 bra WAIT_EMPTY;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r9], 1024;
  shl.b32 %r10, %r3, 10;
  add.u32 %r11, %r20, %r10;
  mul.wide.u32 %rd4, %r2, 1024;
  add.s64 %rd5, %rd2, %rd4;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r11], [%rd5], 1024, [%r9];
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p5, %r2, 8;
  @%p5 bra PRODUCE;
  bra EXIT;
CONSUMER:
  setmaxnreg.inc.sync.aligned.u32 232;
  shr.u32 %r12, %r1, 7;
  add.u32 %r13, %r12, 9;
  mov.u32 %r2, 0;
  mov.u32 %r14, 0;
CONSUME:
  and.b32 %r3, %r2, 1;
  shr.u32 %r4, %r2, 1;
  and.b32 %r5, %r4, 1;
  shl.b32 %r7, %r3, 3;
  add.u32 %r8, %r22, %r7;
  add.u32 %r9, %r21, %r7;
WAIT_FULL:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r9], %r5, 10000000;
  @!%p4 bra WAIT_FULL;
  shl.b32 %r10, %r3, 10;
  add.u32 %r11, %r20, %r10;
  shl.b32 %r15, %r1, 2;
  add.u32 %r16, %r11, %r15;
  ld.shared.u32 %r17, [%r16];
  add.u32 %r14, %r14, %r17;
  bar.sync %r13, 128;
  mbarrier.arrive.shared::cta.b64 %rd6, [%r8];
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p5, %r2, 8;
  @%p5 bra CONSUME;
  ld.param.u64 %rd7, [out];
  cvta.to.global.u64 %rd8, %rd7;
  mul.wide.u32 %rd9, %r1, 4;
  add.s64 %rd10, %rd8, %rd9;
  st.global.u32 [%rd10], %r14;
EXIT:
  ret;
}
""",
      lambda words, inputs: words == [
        sum(inputs[n * 256 + t] for n in range(8)) & 0xFFFFFFFF
        for t in range(256)]),
    # Two warpgroups: the first gives registers back, the second takes
    # more (the warp-specialized kernels' producer and consumers).
    "setmaxnreg": (256, 256, r"""
.visible .entry probe(.param .u64 out, .param .u64 in)
.maxnreg 168
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 128;
  @%p1 bra PRODUCER;
  setmaxnreg.inc.sync.aligned.u32 232;
  bra DONE;
PRODUCER:
  setmaxnreg.dec.sync.aligned.u32 40;
DONE:
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  mov.b32 %r2, 1;
  st.global.u32 [%rd5], %r2;
  ret;
}
""",
      lambda words, inputs: all(w == 1 for w in words)),
}


def run(name):
    threads, words, body, check = PROBES[name]
    cuda = ctypes.CDLL("libcuda.so.1")

    def call(fn, *args):
        result = getattr(cuda, fn)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            cuda.cuGetErrorString(result, ctypes.byref(text))
            raise RuntimeError(f"{fn}: {text.value.decode() if text.value else result}")

    call("cuInit", 0)
    device, context = ctypes.c_int(), ctypes.c_void_p()
    call("cuDeviceGet", ctypes.byref(device), 0)
    call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    call("cuCtxSetCurrent", context)
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    call("cuModuleLoadData", ctypes.byref(module),
         ctypes.c_char_p((HEADER + body).encode()))
    call("cuModuleGetFunction", ctypes.byref(function), module, b"probe")
    # The input: distinct words, or a tile of f16 ones for wgmma_bulk.
    if name == "wgmma_bulk":
        inputs = [0x3C003C00] * 1024
    elif name == "ws_ring":
        inputs = [(0x01020304 * (i + 1)) & 0xFFFFFFFF for i in range(8 * 256)]
    else:
        inputs = [(0x01020304 * (i + 1)) & 0xFFFFFFFF for i in range(words)]
    out, source = ctypes.c_uint64(), ctypes.c_uint64()
    call("cuMemAlloc_v2", ctypes.byref(out), words * 4)
    call("cuMemAlloc_v2", ctypes.byref(source), len(inputs) * 4)
    call("cuMemsetD32_v2", out, 0xFFFFFFFF, words)
    host = struct.pack(f"<{len(inputs)}I", *inputs)
    call("cuMemcpyHtoD_v2", source, host, len(host))
    params = [ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
              ctypes.cast(ctypes.byref(source), ctypes.c_void_p)]
    if name.startswith("tma"):
        # The input as a 32 x 32 tensor of u32 (CU_TENSOR_MAP_DATA_TYPE_UINT32
        # = 2), one 32 x 32 box, no interleave, swizzle, L2 promotion or
        # out-of-bounds fill.
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        storage = ctypes.create_string_buffer(128 + 64)
        address = ctypes.addressof(storage) + (-ctypes.addressof(storage)) % 64
        extent = 30 if name == "tma_oob" else 32
        call("cuTensorMapEncodeTiled", ctypes.c_void_p(address), 2, 2,
             ctypes.c_void_p(source.value), (u64 * 2)(extent, extent),
             (u64 * 1)(128),
             (u32 * 2)(32, 32), (u32 * 2)(1, 1), 0, 0, 0, 0)
        if name != "tma_global":
            params.append(ctypes.c_void_p(address))
        else:
            device_map = ctypes.c_uint64()
            call("cuMemAlloc_v2", ctypes.byref(device_map), 128)
            call("cuMemcpyHtoD_v2", device_map, ctypes.c_void_p(address), 128)
            params.append(ctypes.cast(ctypes.byref(device_map), ctypes.c_void_p))
    params = (ctypes.c_void_p * len(params))(*params)
    call("cuLaunchKernel", function, 1, 1, 1, threads, 1, 1, 0, None, params, None)
    call("cuCtxSynchronize")
    result = ctypes.create_string_buffer(words * 4)
    call("cuMemcpyDtoH_v2", result, out, words * 4)
    values = list(struct.unpack(f"<{words}I", result.raw))
    if check(values, inputs):
        return f"{name}: ok"
    return f"{name}: wrong (first words {[hex(values[i]) for i in range(4)]})"


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "all"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        print(f"no CUDA driver ({error}): nothing to probe")
        return 0
    if name == "all":
        failed = 0
        for probe in PROBES:
            result = subprocess.run([sys.executable, __file__, probe],
                                    capture_output=True, text=True)
            print(result.stdout.strip() or f"{probe}: error ({result.stderr.strip()[-200:]})")
            failed += result.returncode != 0
        return 1 if failed else 0
    if name not in PROBES:
        print(f"unknown probe {name!r}; one of {', '.join(PROBES)} or all")
        return 2
    try:
        line = run(name)
    except RuntimeError as error:
        line = f"{name}: error ({error})"
    print(line)
    return 0 if line.endswith(": ok") else 1


if __name__ == "__main__":
    sys.exit(main())
