//===- Passes.td - Passes of the fa compiler ---------------*- tablegen -*-===//
#ifndef FA_COMPILER_PASSES_TD
#define FA_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def FATile : Pass<"fa-tile", "::mlir::func::FuncOp"> {
  let summary = "Rewrite fa.attention into the tiled FlashAttention-2 algorithm";
  let description = [{
    Replaces each `fa.attention` with an `fa.grid` of programs, one per
    (batch, query head, query tile of `block-m` rows). A program loads its Q
    tile once, then an `scf.for` over K/V tiles of `block-n` rows carries the
    online-softmax state (running max, running sum, unnormalized
    accumulator); `fa.finalize` normalizes once after the loop and the
    program stores its rows of O and LSE. The loop bounds come from
    `fa.kv_tile_range`, which skips K/V tiles that the causal mask hides
    entirely. Tails of lengths that are not multiples of the tile sizes are
    handled by zero-padded loads, `fa.mask` and row-limited stores.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", /*default=*/"64",
           "query rows per tile (B_r)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"64",
           "key/value rows per tile (B_c)">,
    Option<"pageGather", "page-gather", "bool", /*default=*/"false",
           "read a paged cache's K/V tiles row by row, each row's page "
           "looked up in the table (pages that need not hold whole tiles); "
           "otherwise a K/V tile is read from one page (block-n divides the "
           "page size)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::fa::FADialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def FATileBackward : Pass<"fa-tile-backward", "::mlir::func::FuncOp"> {
  let summary = "Rewrite fa.attention_backward into the tiled FlashAttention-2 backward";
  let description = [{
    Replaces each `fa.attention_backward` with three `fa.grid`s that run one
    after another:

    1. Preprocessing, one program per (batch, query head, query tile):
       `D = fa.row_dot(dO, O)` is stored into the `delta` workspace and the
       program's rows of `dq_accum` are zeroed.
    2. The main grid, one program per (batch, K/V head, K/V tile of `block-n`
       rows): K, V and the dK, dV accumulators stay on chip while an
       `scf.for` over the group's query heads and an inner `scf.for` over the
       query tiles that see this K/V tile (`fa.q_tile_range`, causal block
       skipping) recompute `P = fa.recompute_probs(Q K^T, LSE)`, add
       `P^T dO` to dV, form `dS = fa.softmax_grad(P, dO V^T, D)`, add
       `dS^T Q` to dK and add `dS K` to the query tile's rows of `dq_accum`
       (`fa.accumulate_tile`). One program owns all G query heads of its K/V
       head, so dK and dV need no atomics.
    3. Postprocessing, per query tile: dQ = `dq_accum` rounded to dQ's
       element type.

    P and dS are rounded to the input element type before their matmuls, as
    tensor-core kernels do. Tails are handled as in `fa-tile`.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", /*default=*/"64",
           "query rows per tile (streamed)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"64",
           "key/value rows per tile (resident)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::fa::FADialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def FAExpandFloat8Casts : Pass<"fa-expand-float8-casts"> {
  let summary = "Spell out f8E4M3FN conversions as integer arithmetic (CPU)";
  let description = [{
    LLVM has no 8-bit float type and the CPU has no e4m3 instructions, so the
    CPU lowering expands `arith.extf` from f8E4M3FN and `arith.truncf` to it
    into integer arithmetic on the bits (`arith.bitcast` to and from i8):
    the widening is exact; the narrowing rounds to nearest even, saturates
    to +-448 (as the GPU's `cvt.rn.satfinite` does) and keeps NaN.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
  ];
}

def FALowerTilesToLinalg : Pass<"fa-lower-tiles-to-linalg", "::mlir::func::FuncOp"> {
  let summary = "Lower the tile level to linalg/tensor/scf for CPU execution";
  let description = [{
    The CPU lowering of the tile level. `fa.grid` becomes a sequential loop
    nest; tile loads become `tensor.generate` with zero padding; the tile
    matmuls, the mask, the online-softmax step, the rescale and the
    finalization become `linalg.generic` ops on tensors whose bodies spell out
    the arithmetic; tile stores become loops over the valid rows. One-Shot
    Bufferize and `convert-linalg-to-loops` then produce plain
    scf/memref/arith/math loops.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    // The range tables' folds carry LLVM loop annotations.
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def FAPlaceSimt : Pass<"fa-place-simt", "::mlir::func::FuncOp"> {
  let summary = "Place every tile for the SIMT (CUDA-core) strategy";
  let description = [{
    Gives each tile value of an `fa.grid` program a home, as an encoding on
    its tensor type (the lecture's kernel):

    * Q, K and V tiles (`fa.load_tile`) live in shared memory, rows padded
      against bank conflicts (by 4 elements when rows allow 16-byte vector
      loads, else by 1);
    * everything a thread computes for its own elements lives in its
      registers with `#fa.blocked`: the score tile S, the probabilities P, the
      running max m, sum l and the accumulator acc (O_i[B_r/bdy][d/bdx]);
    * a tile that a matmul must read whole (P for P V) is moved to shared
      memory with `fa.convert_layout`.

    Tiles keep their element type: with f16/bf16 inputs the shared tiles are
    16-bit (half the bytes) and the register tiles that the tile program
    rounds (P before P V, O before the store) are 16-bit too; S, the softmax
    state and the accumulator are f32.

    The block has `num-warps * 32` threads arranged as rows x cols, cols the
    largest power of two <= 32 that divides both B_c and D. The pass records
    the launch (`fa.launch = #fa.launch<strategy = simt, threads, shared
    bytes, ...>`) and each shared tile's byte offset (`fa.shared_offset`);
    padding and register estimate come from lib/Strategy/SimtModel. It
    fails, naming the config, the need and the
    limit, when shared memory exceeds the target's per-block limit or the
    thread grid does not divide a tile; it warns when its register estimate
    exceeds what a thread of the block can have (255, or the block's
    share of the 64K-register file for blocks over 256 threads).
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"8",
           "warps per block">,
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "target GPU architecture (sm_80, sm_86, sm_89, sm_90, sm_90a)">,
    Option<"pad", "pad", "int64_t", /*default=*/"0",
           "padding elements per shared-memory row (0: 4 when every shared "
           "row holds a multiple of 4 elements, so rows stay 16-byte aligned "
           "for vector loads; else 1)">,
    Option<"chunkedCopies", "chunked-copies", "bool", /*default=*/"false",
           "the runtime guarantees 16-byte aligned rows in every tensor (the "
           "tensor-core strategies' argument rule): a backward program "
           "without matmuls (the delta program) copies its 2-d tiles in "
           "16-byte chunks (fa.copy_chunks), in rows padded to keep 16-byte "
           "alignment">,
  ];
  let dependentDialects = ["::mlir::fa::FADialect"];
}

def FAPlaceMma : Pass<"fa-place-mma", "::mlir::func::FuncOp"> {
  let summary = "Place every tile for the tensor-core (mma.sync) strategy";
  let description = [{
    Gives each tile value of an `fa.grid` program (f16/bf16 inputs) a home
    for the FlashAttention-2 class kernel (lib/Strategy/MmaModel.h has the
    rules and the numbers):

    * Q, K and V tiles (`fa.load_tile`) live in shared memory, rows padded
      to an odd number of 16-byte chunks (conflict-free ldmatrix and
      cp.async); loads inside the K/V loop get a ring of `stages` slots
      (`fa.pipeline_stages`): the next tiles are copied while the current
      one is used;
    * S, P, the softmax state and the O accumulator live in tensor-core
      accumulator fragments, `#fa.mma`: each warp owns B_r / num-warps rows;
    * the left operand of each matmul is moved to A-operand fragments,
      `#fa.mma_operand`: Q once, from shared memory, before the K/V loop; P in
      registers (the two layouts hold the same elements in the same lanes).
      The right operands (K, V) are read from shared memory by the matmul.

    The pass records the launch (`fa.launch = #fa.launch<strategy = mma,
    threads, shared bytes, stages, ...>`) and each shared tile's byte
    offset (`fa.shared_offset`). It fails,
    naming the config and the limit, when the tiles do not divide into
    fragments or shared memory exceeds the target's limit, and warns when the
    register estimate exceeds what a thread can have.
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"4",
           "warps per block">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "K/V tiles in flight (1: no prefetch)">,
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "target GPU architecture (sm_80, sm_86, sm_89, sm_90, sm_90a)">,
  ];
  let dependentDialects = ["::mlir::fa::FADialect"];
}

def FAPlaceWgmma : Pass<"fa-place-wgmma", "::mlir::func::FuncOp"> {
  let summary = "Place every tile for the Hopper warpgroup-MMA (wgmma) strategy";
  let description = [{
    Gives each tile value of an `fa.grid` program (f16/bf16 inputs, sm_90a)
    a home for warpgroup MMA (lib/Strategy/WgmmaModel.h has the rules):

    * Q, K and V tiles (`fa.load_tile`) live in shared memory in the
      128-byte swizzle that wgmma descriptors read,
      `#fa.swizzled_shared<bytes = 128>`; loads inside the K/V loop get a
      ring of `stages` slots (`fa.pipeline_stages`);
    * S, P, the softmax state and the O accumulator live in accumulator
      fragments, `#fa.mma<warps>`: the m64nN accumulator of a warpgroup is
      its 4 warps' m16n8 fragments stacked, so warp w owns rows 16w..16w+15;
    * Q K^T reads both operands from shared memory; P moves to A-operand
      fragments, `#fa.mma_operand` (the register-A form of wgmma has the
      mma.sync A layout per warp), and P V reads V from shared memory.

    Block-m is 64 rows per warpgroup (16 x num-warps). The pass records the
    launch (`#fa.launch<strategy = wgmma, ...>`) and each shared tile's byte
    offset from the 1024-aligned base (`fa.shared_offset`), and fails, naming
    the config and the limit, when the config does not fit.
  }];
  let options = [
    Option<"numWarps", "num-warps", "int64_t", /*default=*/"8",
           "warps per block (4 per warpgroup)">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "K/V tiles in flight (1: no prefetch)">,
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "target GPU architecture (sm_90a only)">,
    Option<"transposedScores", "transposed-scores", "int64_t",
           /*default=*/"-1",
           "the backward computes S^T and dP^T (-1: where the resource "
           "model says so, 0: never, 1: always)">,
    Option<"exp2OnFmaEvery", "exp2-on-fma-every", "int64_t",
           /*default=*/"0",
           "8-bit forward programs: every k-th exponential of the online "
           "softmax on the FMA pipe, fa.exp2_on_fma (0: none; the pipeline "
           "passes WgmmaModel's kExp2OnFmaEvery)">,
    Option<"scoreModExp2OnFmaEvery", "score-mod-exp2-on-fma-every",
           "int64_t", /*default=*/"0",
           "16-bit forward programs whose score_mod runs a MUFU op (tanh, "
           "exp, log, sqrt, a division, ...): every k-th exponential of the "
           "online softmax on the FMA pipe, fa.exp2_on_fma (0: none; the "
           "pipeline passes WgmmaModel's kScoreModExp2OnFmaEvery)">,
    Option<"skipUnitRescale", "skip-unit-rescale", "bool",
           /*default=*/"false",
           "forward programs: the online softmax's correction is exactly 1 "
           "where the running max did not move, and the accumulator's "
           "rescale by it multiplies only in warps where a row's correction "
           "is not 1 (fa.skip_unit_factors on both; the pipeline passes "
           "WgmmaModel's kSkipUnitRescale)">,
    Option<"producerTransposesValue", "producer-transposes-value", "int64_t",
           /*default=*/"-1",
           "8-bit forward programs: the producer warpgroup writes the "
           "transposed V tile P V reads, once per tile for every consumer "
           "warpgroup, instead of each consumer warpgroup its own copy "
           "(fa.producer_writes on that fa.convert_layout; -1: where "
           "WgmmaModel's producerTransposesValue says so, 0: never, 1: "
           "always)">,
    Option<"rotatedStaging", "rotated-staging", "std::string",
           /*default=*/"\"model\"",
           "dkdv programs: the stagings that rotate between two shared "
           "buffers by iteration parity, where they fit beside the stages "
           "(fa.pipeline_stages and an iteration operand on the "
           "fa.convert_layout): none | grad-scores | both | model "
           "(WgmmaModel's kRotatedStaging)">,
    Option<"stagedRowValues", "staged-row-values", "int64_t",
           /*default=*/"-1",
           "dkdv programs: LSE and D load into shared-memory rings beside "
           "Q's (fa.pipeline_stages; fa-warp-specialize's producer copies "
           "them with Q) and the consumers read their rows from there "
           "(fa.convert_layout), where they fit (-1: where WgmmaModel's "
           "stagesRowValues says so, 0: never, 1: always)">,
  ];
  let dependentDialects = ["::mlir::fa::FADialect"];
}

def FAWgmmaPipeline : Pass<"fa-wgmma-pipeline", "::mlir::func::FuncOp"> {
  let summary = "Overlap the online softmax with the tensor cores (wgmma)";
  let description = [{
    Software-pipelines the K/V loop of programs placed by fa-place-wgmma by
    one stage: iteration j starts S_j = Q K_j^T and O = acc + P_{j-1} V_{j-1}
    (`async` fa.tile_matmul), waits for S_j alone (`fa.async_wait` with
    pending = 1), runs the softmax of tile j while P V still runs, then waits
    for O and rescales it. A prologue computes the softmax of the first
    tile, an epilogue the last P V; both are skipped for an empty K/V range.
    Programs of other strategies are left alone.
  }];
  let options = [
    Option<"waitAfterSoftmax", "wait-after-softmax", "int64_t", "-1",
           "keep the wait for P_{j-1} V_{j-1} after the softmax of tile j "
           "(fa.async_wait's `after`; ptxas hoists the wait otherwise): 1 "
           "yes, 0 no, -1 the resource model's choice "
           "(WgmmaModel::waitsAfterSoftmax)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def FATmaReduce : Pass<"fa-tma-reduce", "::mlir::func::FuncOp"> {
  let summary = "Add staged f32 tiles to global memory with the TMA engine";
  let description = [{
    An `fa.accumulate_tile` whose tile the placement staged in 128-byte-
    swizzled shared memory (the wgmma backward's dQ part, `fa.convert_layout`
    with a shared offset) becomes one bulk reduction of the TMA engine per 32
    f32 columns (`nvvm.cp.async.bulk.tensor.reduce` add, committed as one
    group), issued after the staging's barrier by the first thread of each
    warpgroup for its own column slice where the warpgroups split the
    tile's columns in slices of two boxes or more, else by the program's
    first thread; an issuer waits for its previous group to have read the
    buffer before the tile is written again, and for every group to finish
    after the loops. In a grid marked `fa.writer_warp` (fa-warp-specialize's
    writer-warp) a warp of the producer warpgroup issues them instead, and
    takes the deterministic turns around them; the consumers only stage the
    tile (`fa.hand_off`). The kernel gains a tensor map parameter for the
    destination (`dq_accum` in `fa.tensor_maps`, after the maps already
    there). Run after fa-warp-specialize.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def FAPrefetchRowValues : Pass<"fa-prefetch-row-values", "::mlir::func::FuncOp"> {
  let summary = "Load a loop's per-row values one iteration ahead";
  let description = [{
    An `fa.load_tile` marked `fa.prefetch` by the placement (per-row
    values in registers: the backward's LSE and D rows of the visited query
    tile) is loaded for the next iteration at the top of its `scf.for` body
    and carried by the loop (the first tile's before the loop), so that its
    latency hides behind an iteration's tensor-core work. The last
    iteration's load reads past the loop's rows (zero-padded past the
    tensor's end). A marked load whose indices depend on more than the
    induction variable (and values from outside the loop), or whose source
    the program writes, is an error. Run after fa-warp-specialize (the
    consumers' loops are final then).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def FAWarpSpecialize : Pass<"fa-warp-specialize", "::mlir::func::FuncOp"> {
  let summary = "Split a wgmma program into a TMA producer and MMA consumers";
  let description = [{
    The schedule of the Hopper strategy, explicit in the IR: one producer
    warpgroup (added after the placed warps) copies Q, K and V with the TMA
    engine (`nvgpu.tma.async.load`, one box per 64-column block of the
    128-byte swizzle) into the shared slots the placement chose; the placed
    warpgroups consume them. Full barriers (one per slot and tensor) tell
    the consumers a tile landed; empty barriers (one per slot) tell the
    producer every consumer thread is done with it. The kernel gains one
    tensor map parameter per tensor (`fa.tensor_maps`), the launch gains the
    producer's warps, and `setmaxnreg` moves registers from the producer to
    the consumers. Persistent (where the register model allows it,
    WgmmaModel::runsPersistent): the grid becomes one block per SM, and
    each role walks the block's work items in the same order ((batch,
    head) pairs in L2-sized sections; with the causal mask an item is a
    query tile and its mirror, so that items are equally long), the rings'
    phases carried from item to item and Q released by a q_empty barrier so
    that the next Q loads during this item's stores (the runtime launches
    min(tiles, SMs) blocks: `fa.persistent`). The backward's dkdv program
    the other way round: K and V copied once, Q and dO streamed through the
    rings over the loops around their loads (query heads of the GQA group,
    query tiles); its consumers' block-wide barriers become a named barrier
    of their threads. Programs of other strategies are left alone.
  }];
  let options = [
    Option<"persistent", "persistent", "bool", /*default=*/"true",
           "one block per SM walks the tiles where the register model "
           "allows it (else always one block per tile)">,
    Option<"writerWarpMode", "writer-warp", "std::string", /*default=*/"\"none\"",
           "dkdv programs whose producer warpgroup gets a writer warp for "
           "fa-tma-reduce's dQ reductions (and the deterministic turns): "
           "none | deterministic | every (varlen batches and block "
           "masks where WgmmaModel's kWriterWarpForRagged and "
           "kWriterWarpForTables say so) | all (those too; the pipeline "
           "passes WgmmaModel's kWriterWarp); marked fa.writer_warp">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def FAPingPong : Pass<"fa-pingpong", "::mlir::func::FuncOp"> {
  let summary = "Consumer warpgroups take turns at the tensor cores";
  let description = [{
    In a warp-specialized wgmma program with two or more consumer
    warpgroups, each iteration of the pipelined K/V loop issues its matmuls
    in warpgroup order, guarded by named barriers (1 + warpgroup, 256
    threads: the waiting warpgroup and the one before it), so that one
    warpgroup's softmax overlaps the next one's matmuls. Runs after
    fa-warp-specialize and fa-wgmma-pipeline; other programs (the
    backward's) are left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect"];
}

def FAMarkTensorMapParams : Pass<"fa-mark-tensor-map-params", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass TMA tensor maps by value as grid constants";
  let description = [{
    After convert-gpu-to-nvvm: the parameters that `fa.tensor_maps` names
    become 128-byte, 64-byte-aligned by-value parameters marked
    `nvvm.grid_constant`, so the kernel takes the runtime's CUtensorMap
    structs directly (`.param .align 64 .b8 name[128]`) and the TMA reads
    them from parameter space.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def FAExternDynamicShared : Pass<"fa-extern-dynamic-shared", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Declare the dynamic shared-memory base as an external symbol";
  let description = [{
    After convert-gpu-to-nvvm: the zero-size shared globals that
    `gpu.dynamic_shared_memory` lowered to get external linkage, so that the
    NVPTX back end declares them `.extern .shared ... []` (the start of the
    dynamic region, after every static shared variable) rather than as a
    1-byte static variable that ptxas may place in front of the kernel's
    static mbarriers, where the tiles aligned from it would overlap them.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def FALowerBlockMask : Pass<"fa-lower-block-mask", "::mlir::ModuleOp"> {
  let summary = "Lower fa.block_mask to the program that fills its range tables";
  let description = [{
    A function holding an `fa.block_mask` becomes three programs run in
    order: two fill the tables with empty ranges (`[Sk, 0)` per 16 query
    rows, `[Sq, 0)` per 16 keys), and one per (16-row group, table head,
    batch) tests every score of its rows, 16 x 16 at a time, against the
    causal mask and the mask_mod, and narrows the tables' entries to the
    kept scores with atomic min / max (a 16 x 16 square with nothing kept
    touches no entry; under the causal mask the squares right of the
    group's last visible key are not visited).

    With `target=gpu` the programs are kernels of `gpu.module @fa_kernels`
    (`<function>_init_keys`, `<function>_init_queries`: one thread per
    entry, 128 per block; `<function>_ranges`: block (group, head, batch),
    its 128 threads taking every 128th square of keys); with `target=cpu`
    they are loops in the function, one square after another.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"gpu\"",
           "gpu (kernels of gpu.module @fa_kernels) or cpu (loops)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def FAConvertPlacedToGPU : Pass<"fa-convert-placed-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower placed fa.grid programs to gpu.func kernels";
  let description = [{
    Each function holding a placed `fa.grid` becomes a `gpu.func` kernel in
    `gpu.module @fa_kernels` (the host side is the runtime's job). Block
    `(x, y, z)` runs program (query tile x, head y, batch z) with the
    threads of its `#fa.launch`, which the kernel keeps. Each kernel is then
    lowered by the strategy that placed it: simt (compiler/Conversion/Simt:
    register tiles become vectors of the elements a thread owns, fully
    unrolled; shared tiles views of the dynamic shared memory at their
    `fa.shared_offset`; loops and warp shuffles with barriers around
    shared-memory writes), mma (compiler/Conversion/Mma: cp.async rings,
    ldmatrix, mma.sync on fragment registers, quad shuffles) or wgmma
    (compiler/Conversion/Wgmma: cp.async rings in the 128-byte swizzle,
    wgmma.mma_async on shared-memory descriptors and register fragments).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "target GPU architecture (from sm_90 on, the mma backward adds "
           "dQ with 2-wide vector reductions)">,
  ];
}

def FAElideRedundantBarriers : Pass<"fa-elide-redundant-barriers", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Remove barriers that follow another with no shared-memory access between";
  let description = [{
    Each tile op of the GPU lowering fences its own shared-memory writes with
    a barrier on either side, which is simple and correct but repeats
    barriers where two such ops meet (the barrier after the K tile is
    written and the one before the V tile is written). A `gpu.barrier` is
    redundant when, in the same block, the previous operation that touches
    memory is another `gpu.barrier`: all threads already met there and
    nothing shared happened since. Operations whose effects are unknown, or
    that hold regions, count as touching memory.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def FASplitIndexToFloat : Pass<"fa-split-index-to-float", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Move constant terms out of integer-to-float conversions";
  let description = [{
    A score_mod that converts index arithmetic to a float (ALiBi's distance
    |q + Sk - Sq - kv|) is inlined at each of a thread's score elements,
    whose key index is the thread's first column plus a constant: one
    integer-to-float conversion per score (I2F runs at the exponentials'
    quarter rate). This pass rewrites f32 `arith.sitofp(base + c)` (the
    integer's constant terms gathered through `addi`/`subi` and an
    `index_cast` from index) into `sitofp(base) + c`, and `sitofp(|x|)`
    (`math.absi` or the select form) into `|sitofp(x)|`, so that CSE keeps
    one conversion per row and each score takes a float add. Exact where
    the integers and constants are below 2^24 in magnitude (constants
    beyond that stay); within one rounding past it.
  }];
  let dependentDialects = ["::mlir::math::MathDialect"];
}

def FAHoistCaptureLoads : Pass<"fa-hoist-capture-loads", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Issue the loads of captured tensors as early as their indices allow";
  let description = [{
    A variant region's loads of captured tensors (document ids, bias
    tables, slopes: `memref.load` marked `fa.capture_load` where the region
    was inlined) sit where the region is evaluated: right after the scores
    they modify arrive, so every tile waits a full global-memory latency
    before its mask or score_mod can run. Their indices depend only on the
    tile's position and the thread's rows and columns, known at the top of
    the loop iteration. This pass moves each marked load, with the pure ops
    computing its indices:
    1. out of an `scf.if` marked `fa.hoist_capture_loads` (the branch that
       tests a tile's scores per element), innermost first: the load then
       also runs for tiles that skip the test (a captured tensor is read
       only, and its indices stay inside it for any index of the problem);
    2. up its block, to just after the last operation it depends on that
       cannot move (or the block's start): above the tensor-core waits, so
       that the latency overlaps the products.
    Loads never leave a loop or an unmarked branch (a warp-specialized
    kernel's producer branch must not gain registers), and the loads stay
    in their order relative to each other only where their indices demand.
    Only data dependencies stop a load: it may rise above barriers, fences
    and register reallocation (`setmaxnreg`) in its block, and pure ops of
    its index computation move out of the marked branch with it (the
    branch's condition is the same for every thread of the tile).
  }];
}

def FACheckSharedBounds : Pass<"fa-check-shared-bounds", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Check that a kernel's shared-memory views lie within its launch";
  let description = [{
    Each `memref.view` of the dynamic shared memory at a constant byte
    offset must end within the kernel's `#fa.launch` shared bytes; one that
    does not is an error naming both. The placement verifier checks the
    placed tiles; this pass checks the lowered kernel (what the strategies'
    lowerings and schedules built from them). Views at run-time offsets
    (ring slots) are not checked.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FAMathToNVVMApprox : Pass<"fa-math-to-nvvm-approx"> {
  let summary = "Use the hardware exp2/log2 approximations for f32";
  let description = [{
    Rewrites f32 `math.exp2` and `math.log2` into the `ex2.approx.ftz.f32`
    and `lg2.approx.ftz.f32` instructions (through their NVVM intrinsics),
    as FlashAttention kernels do: softmax needs neither denormals nor the
    last ulp, and the libdevice routines would need libdevice at link time.
    f32 `math.tanh` marked fastmath `afn` (a score_mod of a 16- or 8-bit
    kernel) becomes `tanh.approx.f32`; without the flag, 1 - 2 / (2^(2x
    log2 e) + 1) on the same ex2/rcp approximations, f32-accurate.
    Run before `convert-gpu-to-nvvm`, which would otherwise call libdevice.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // FA_COMPILER_PASSES_TD

def FASerializeToPtx : Pass<"fa-serialize-to-ptx", "::mlir::ModuleOp"> {
  let summary = "Translate each NVVM gpu.module to PTX in a gpu.binary";
  let description = [{
    Runs LLVM's NVPTX back end on every `gpu.module` that carries an
    `#nvvm.target` and replaces the module with a `gpu.binary` holding the
    PTX text (format `assembly`). Generated kernels are self-contained: a
    module that declares an external function (a libdevice `__nv_*` routine
    left by an unlowered math op, say) is rejected, naming the function,
    instead of being linked against libdevice. That keeps PTX generation
    independent of where, or whether, a CUDA toolkit is installed.

    Example:
    ```mlir
    gpu.module @kernels [#nvvm.target<chip = "sm_90a">] { ... }
    // becomes
    gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90a">,
                                     assembly = "...PTX...">]
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}
