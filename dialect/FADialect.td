//===- FADialect.td - The fa dialect -----------------------*- tablegen -*-===//
//
// The dialect that describes attention at three levels: the problem
// (`fa.attention`), the tiled FlashAttention algorithm (tile ops), and, later,
// where each tile lives on the GPU (placement encodings).
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FADIALECT_TD
#define FA_DIALECT_FADIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

def FA_Dialect : Dialect {
  let name = "fa";
  let cppNamespace = "::mlir::fa";
  let summary = "FlashAttention: attention problems and their tiled algorithm";
  let description = [{
    The `fa` dialect carries an attention computation from its mathematical
    statement down to the tiled, online-softmax form that a GPU kernel runs.

    * Problem level: `fa.attention` reads Q, K, V buffers and writes O and the
      per-row log-sum-exp (LSE) kept for the backward pass;
      `fa.attention_backward` turns dO into dQ, dK and dV.
    * Tile level: `fa.grid` runs one program per (batch, head, tile). A
      forward program keeps its Q tile resident, streams K/V tiles through
      an `scf.for` that carries the online-softmax state (running max `m`,
      running sum `l`, unnormalized accumulator `acc`), and normalizes once
      at the end (FlashAttention-2's deferred normalization).
    * The backward (`fa.attention_backward`) tiles into three grids: D =
      rowsum(dO * O) per query tile; one program per K/V tile that keeps K,
      V, dK and dV on chip, streams the query tiles that see it, recomputes
      P from the LSE and adds its share of dQ with `fa.accumulate_tile`; and
      dQ rounded from its f32 accumulator.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Placement results on ops (`fa.launch`, `fa.shared_offset`,
  // `fa.pipeline_stages`, `fa.prefetch`) are checked by the dialect.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The launch of a placed program or kernel (a LaunchAttr).
    static ::llvm::StringRef getLaunchAttrName() { return "fa.launch"; }
    /// Byte offset of a shared tile in the block's dynamic shared memory.
    static ::llvm::StringRef getSharedOffsetAttrName() {
      return "fa.shared_offset";
    }
    /// Slots of the shared ring of a tile loaded inside the K/V loop.
    static ::llvm::StringRef getPipelineStagesAttrName() {
      return "fa.pipeline_stages";
    }
    /// The TMA tensor maps a kernel takes as its first parameters: an array
    /// of {arg, tensor = "q" | "k" | "v" | "do", box_rows, box_cols}
    /// dictionaries.
    static ::llvm::StringRef getTensorMapsAttrName() {
      return "fa.tensor_maps";
    }
    /// A grid (and its kernel) whose blocks each walk many tiles: the
    /// runtime launches min(tiles, SMs) blocks along x (a unit attribute).
    static ::llvm::StringRef getPersistentAttrName() {
      return "fa.persistent";
    }
    /// A warp-specialized dkdv grid whose producer warpgroup has a writer
    /// warp (fa-warp-specialize's writer-warp): fa-tma-reduce gives it the
    /// program's dQ reductions and turns (a unit attribute).
    static ::llvm::StringRef getWriterWarpAttrName() {
      return "fa.writer_warp";
    }
    /// On the fa.convert_layout that gives P V its transposed 8-bit V
    /// tile: fa-place-wgmma's choice that the producer warpgroup writes
    /// that copy, once per tile for every consumer warpgroup, which
    /// fa-warp-specialize carries out (a unit attribute).
    static ::llvm::StringRef getProducerWritesAttrName() {
      return "fa.producer_writes";
    }
    /// On fa.online_softmax: every k-th of a thread's exponentials of a row
    /// is computed on the FMA and integer pipes instead of the MUFU unit
    /// (lib/Exp2Polynomial.h; a positive integer k; the GPU lowering reads
    /// it, the CPU one computes every exponential alike).
    static ::llvm::StringRef getExp2OnFmaAttrName() {
      return "fa.exp2_on_fma";
    }
    /// An fa.load_tile of per-row values that the placement asks to be
    /// loaded one iteration of its loop ahead (fa-prefetch-row-values; a
    /// unit attribute).
    static ::llvm::StringRef getPrefetchAttrName() { return "fa.prefetch"; }
    /// A memref.load inlined from a variant region: it reads a captured
    /// tensor (not empty), which nothing writes while the kernel runs, at
    /// indices clamped into the tensor, so it may run earlier, or on a path
    /// that does not use it (fa-hoist-capture-loads; a unit attribute).
    static ::llvm::StringRef getCaptureLoadAttrName() {
      return "fa.capture_load";
    }
    /// A 2-d shared fa.load_tile whose source rows start 16-byte aligned
    /// (the runtime's argument rule for the tensor-core strategies' tensors),
    /// so that the lowering copies it in 16-byte chunks (a unit attribute;
    /// fa-place-simt's chunked-copies).
    static ::llvm::StringRef getCopyChunksAttrName() {
      return "fa.copy_chunks";
    }
    /// On fa.rescale: the GPU lowering multiplies only where some thread
    /// of the warp has a factor other than 1 (a warp vote: a running max
    /// moved); multiplying by 1 changes no bit. On fa.online_softmax: the
    /// correction is exactly 1 where the running max did not move (exp2
    /// of (m - m_new) log2 e). A unit attribute; fa-place-wgmma's
    /// skip-unit-rescale.
    static ::llvm::StringRef getSkipUnitFactorsAttrName() {
      return "fa.skip_unit_factors";
    }
    /// On fa.mask with a mask_mod: the GPU lowering tests the tile's
    /// scores in two versions, chosen per thread: where the thread's last
    /// key lies inside every captured tensor dimension the mask_mod indexes
    /// by the key itself (kv_idx), those loads go unclamped (one base
    /// address for the thread's key columns); elsewhere (the tail tile)
    /// every index is clamped as always. A unit attribute.
    static ::llvm::StringRef getUncheckedKeyLoadsAttrName() {
      return "fa.unchecked_key_loads";
    }
    /// An scf.if whose then-branch's capture loads may run before it
    /// (the per-element mask of a tile; a unit attribute).
    static ::llvm::StringRef getHoistCaptureLoadsAttrName() {
      return "fa.hoist_capture_loads";
    }
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

class FA_Op<string mnemonic, list<Trait> traits = []>
    : Op<FA_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def FA_MaskKind : I32EnumAttr<"MaskKind", "which scores are masked out", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"causal", 1>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fa";
}

def FA_MaskAttr : EnumAttr<FA_Dialect, FA_MaskKind, "mask"> {
  let summary = "attention mask";
  let description = [{
    `#fa.mask<none>` keeps every score. `#fa.mask<causal>` lets query row `i`
    see key column `j` only when `j <= i + (Sk - Sq)`: the mask is aligned to
    the bottom-right corner of the score matrix, as FlashAttention 2.1 and
    later do, so that the last query sees every key. With `Sq > Sk` the first
    `Sq - Sk` rows see no key at all; they produce O = 0 and LSE = -inf.

    ```
    Sq = 3, Sk = 5 (offset 2)     Sq = 5, Sk = 3 (offset -2)
        k0 k1 k2 k3 k4                k0 k1 k2
    q0   x  x  x  .  .            q0   .  .  .
    q1   x  x  x  x  .            q1   .  .  .
    q2   x  x  x  x  x            q2   x  .  .
                                  q3   x  x  .
                                  q4   x  x  x
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def FA_StrategyKind : I32EnumAttr<"StrategyKind",
    "how a placed program computes on the GPU", [
    I32EnumAttrCase<"simt", 0>,
    I32EnumAttrCase<"mma", 1>,
    I32EnumAttrCase<"wgmma", 2>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fa";
}

def FA_LaunchAttr : AttrDef<FA_Dialect, "Launch"> {
  let mnemonic = "launch";
  let summary = "how a placed program is launched";
  let description = [{
    Written by a placement pass on the `fa.grid` it placed (as
    `fa.launch`) and carried to the kernel: the strategy whose lowering
    patterns apply, the threads of a block, the dynamic shared-memory bytes
    of a block, the K/V tiles in flight and the placement's register
    estimate per thread. Verified: a whole number of warps up to 1024
    threads, non-negative bytes, at least one stage.

    ```mlir
    fa.grid (...) { ... } attributes {fa.launch = #fa.launch<strategy = mma,
        threads = 128, shared_bytes = 104448, stages = 2, registers = 244>}
    ```
  }];
  let parameters = (ins EnumParameter<FA_StrategyKind>:$strategy,
                        "int64_t":$threads, "int64_t":$sharedBytes,
                        "int64_t":$stages, "int64_t":$registers,
                        DefaultValuedParameter<"int64_t", "0">:$producerWarps);
  let assemblyFormat = [{
    `<` `strategy` `=` $strategy `,` `threads` `=` $threads `,`
    `shared_bytes` `=` $sharedBytes `,` `stages` `=` $stages `,`
    `registers` `=` $registers (`,` `producer_warps` `=` $producerWarps^)? `>`
  }];
  let builders = [
    AttrBuilder<(ins "StrategyKind":$strategy, "int64_t":$threads,
                     "int64_t":$sharedBytes, "int64_t":$stages,
                     "int64_t":$registers), [{
      return $_get($_ctxt, strategy, threads, sharedBytes, stages, registers,
                   /*producerWarps=*/0);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Threads that compute on the program's register tiles: all of them,
    /// except a warp-specialized kernel's producer warps.
    int64_t getComputeThreads() const {
      return getThreads() - 32 * getProducerWarps();
    }
  }];
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Placement encodings (on tile tensor types)
//===----------------------------------------------------------------------===//

def FA_TileEncodingInterface : AttrInterface<"TileEncodingInterface"> {
  let cppNamespace = "::mlir::fa";
  let description = [{
    Where a tile lives on the GPU. Passes ask the encoding how many elements a
    thread holds in registers and how many bytes of shared memory the tile
    takes, and lowerings ask a register encoding which element each register
    slot of each thread holds, without knowing which encoding it is.
  }];
  let methods = [
    InterfaceMethod<"Whether the tile lives in shared memory.",
      "bool", "isShared">,
    InterfaceMethod<"Elements of a tile of `shape` held in each thread's registers.",
      "int64_t", "getRegistersPerThread", (ins "::llvm::ArrayRef<int64_t>":$shape)>,
    InterfaceMethod<"Shared-memory elements a tile of `shape` occupies.",
      "int64_t", "getSharedElements", (ins "::llvm::ArrayRef<int64_t>":$shape)>,
    InterfaceMethod<[{
      Where each thread's register slots of a tile of `shape` lie in the
      tile, which slots share a row and which lanes a row reduction combines
      (dialect/RegisterLayout.h); failure for a tile in shared memory.
    }], "::mlir::FailureOr<::mlir::fa::RegisterLayout>", "getRegisterLayout",
      (ins "::llvm::ArrayRef<int64_t>":$shape)>,
  ];
}

def FA_BlockedEncodingAttr : AttrDef<FA_Dialect, "BlockedEncoding",
    [DeclareAttrInterfaceMethods<FA_TileEncodingInterface>,
     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "blocked";
  let summary = "a tile distributed over the threads' registers";
  let description = [{
    The block's threads form a `rows x cols` grid (thread t is at
    `(t / cols, t % cols)`). Element `(r, c)` of a 2-d tile is held by thread
    `(r % rows, c % cols)` in register slot `(r / rows, c / cols)`, so each
    thread holds `R/rows x C/cols` elements: the lecture's per-thread
    `O_i[B_r/bdy][d/bdx]`. A 1-d tile of per-row values (running max, sum)
    is held the same way along rows and replicated across the `cols` threads
    of a row.

    `#fa.blocked<threads = [2, 4]>` on a 4x8 tile (entry = thread):

    ```
           c0  c1  c2  c3  c4  c5  c6  c7
      r0 [  0   1   2   3   0   1   2   3 ]
      r1 [  4   5   6   7   4   5   6   7 ]
      r2 [  0   1   2   3   0   1   2   3 ]
      r3 [  4   5   6   7   4   5   6   7 ]
    ```

    Thread 5 holds (r1, c1), (r1, c5), (r3, c1), (r3, c5). The threads of one
    row are consecutive lanes of one warp (`cols` divides 32), so row
    reductions are warp shuffles.
  }];
  let parameters = (ins "int64_t":$threadRows, "int64_t":$threadCols);
  let assemblyFormat = "`<` `threads` `=` `[` $threadRows `,` $threadCols `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumThreads() const { return getThreadRows() * getThreadCols(); }
  }];
}

def FA_SharedEncodingAttr : AttrDef<FA_Dialect, "SharedEncoding",
    [DeclareAttrInterfaceMethods<FA_TileEncodingInterface>,
     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "shared";
  let summary = "a tile in shared memory, row-major with padded rows";
  let description = [{
    Row `r` of an `R x C` tile starts at element `r * (C + pad)`. With 4-byte
    elements and `C` a multiple of 32, a padding of 1 puts column `c` of
    consecutive rows in consecutive banks, so threads that read one column of
    different rows (`K[j][k]` for `j = lane`) do not conflict.

    ```
    #fa.shared<pad = 1>, 3 x 4 tile (. = padding):
      [ a0 a1 a2 a3 . b0 b1 b2 b3 . c0 c1 c2 c3 . ]
    ```
  }];
  let parameters = (ins "int64_t":$pad);
  let assemblyFormat = "`<` `pad` `=` $pad `>`";
  let genVerifyDecl = 1;
}

def FA_MmaEncodingAttr : AttrDef<FA_Dialect, "MmaEncoding",
    [DeclareAttrInterfaceMethods<FA_TileEncodingInterface>,
     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "mma";
  let summary = "a tile in tensor-core accumulator fragments (mma.sync m16n8)";
  let description = [{
    The accumulator layout of `mma.sync.m16n8k16` (the S and O tiles of the
    mma strategy). The `warps` of the block split the rows: warp `w` owns
    rows `[w * R / warps, (w + 1) * R / warps)`, a multiple of 16. Those rows
    are cut into 16 x 8 fragments; in each, lane `(g, t) = (lane / 4,
    lane % 4)` holds 4 f32 (lib/Strategy/MmaLayout.h has the table):

    ```
    16 x 8 fragment (entry = lane holding the element pair):
            c0c1 c2c3 c4c5 c6c7
      r0  [   0    1    2    3 ]   c0, c1 of each lane
      r1  [   4    5    6    7 ]
      ...
      r7  [  28   29   30   31 ]
      r8  [   0    1    2    3 ]   c2, c3 of each lane
      ...
      r15 [  28   29   30   31 ]
    ```

    A thread's registers list its fragments row block by row block
    (`(mi * C / 8 + ni) * 4 + e`). A 1-d tile of per-row values (running
    max, sum) holds the two rows `g` and `g + 8` of each row block, the same
    in the 4 lanes of a row; row reductions are shuffles within the quad.

    ```mlir
    tensor<128x64xf32, #fa.mma<warps = 8>>  // 8 warps x 16 rows; 32 f32 a thread
    ```

    With `warps_n` > 1 the warps form a 2-d grid, `warps / warps_n` along
    the rows and `warps_n` along the columns: warp `w` owns rows
    `[(w / warps_n) * R', (w / warps_n + 1) * R')` with
    `R' = R / (warps / warps_n)`, and columns
    `[(w % warps_n) * C', ...)` with `C' = C / warps_n`. Products whose
    operands both come from shared memory then read each operand row once
    per warp row or column instead of once per warp (the backward's
    matmuls); per-row values of a 1-d tile are held by every warp of the
    row slice. Row reductions and A fragments taken from the accumulator
    need `warps_n` = 1 (a row would span warps).

    ```mlir
    tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>  // 32 x 64 a warp
    ```

    `rows_first` numbers the warps of the grid down the rows first: warp `w`
    owns row slice `w % (warps / warps_n)` and column slice
    `w / (warps / warps_n)`. With 16 rows a warp, 4 consecutive warps (a
    warpgroup) then hold 64 consecutive rows of one column slice: the
    accumulator of one `wgmma` m64 (the wgmma backward's S, dP and dQ, whose
    warpgroups split the columns).

    ```mlir
    tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
    ```

    `transposed` holds the tile's transpose: element `(r, c)` of an
    `R x C` tile lives where the same encoding without `transposed` puts
    element `(c, r)` of a `C x R` tile (its twin). The wgmma backward
    computes S^T = K Q^T and dP^T = V dO^T so that each warpgroup's
    accumulator rows are its keys (P^T and dS^T are then A operands of
    dV and dK in registers), while the tile ops still see S and dP, query
    rows by key columns. A 1-d tile holds the per-row values of those rows:
    the twin's columns (LSE and D of the thread's queries).

    ```mlir
    tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>  // twin 128 x 64
    tensor<64xf32, #fa.mma<warps = 8, transposed = true>>      // 16 a thread
    ```
  }];
  let parameters = (ins "int64_t":$warps,
                        DefaultValuedParameter<"int64_t", "1">:$warpsN,
                        DefaultValuedParameter<"int64_t", "0">:$rowsFirst,
                        DefaultValuedParameter<"bool", "false">:$transposed);
  let builders = [
    AttrBuilder<(ins "int64_t":$warps), [{
      return $_get($_ctxt, warps, 1, 0, false);
    }]>,
    AttrBuilder<(ins "int64_t":$warps, "int64_t":$warpsN), [{
      return $_get($_ctxt, warps, warpsN, 0, false);
    }]>,
    AttrBuilder<(ins "int64_t":$warps, "int64_t":$warpsN,
                     "int64_t":$rowsFirst), [{
      return $_get($_ctxt, warps, warpsN, rowsFirst, false);
    }]>
  ];
  // `<warps = W` and then, in any order, the parameters that differ from
  // their defaults (printed in declaration order).
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Warps along the rows.
    int64_t getWarpsM() const { return getWarps() / getWarpsN(); }
    /// The row slice and column slice of warp `warp` (see rows_first).
    int64_t warpRowSlice(int64_t warp) const {
      return getRowsFirst() ? warp % getWarpsM() : warp / getWarpsN();
    }
    int64_t warpColumnSlice(int64_t warp) const {
      return getRowsFirst() ? warp / getWarpsM() : warp % getWarpsN();
    }
    /// The same warps with `transposed` flipped: the encoding of the
    /// tile's transpose in the same registers.
    MmaEncodingAttr getTwin() const {
      return get(getContext(), getWarps(), getWarpsN(), getRowsFirst(),
                 !getTransposed());
    }
  }];
}

def FA_MmaOperandEncodingAttr : AttrDef<FA_Dialect, "MmaOperandEncoding",
    [DeclareAttrInterfaceMethods<FA_TileEncodingInterface>,
     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "mma_operand";
  let summary = "a tile in tensor-core A-operand fragments (mma.sync k16)";
  let description = [{
    The A-operand layout of `mma.sync.m16n8k16` (row-major, f16/bf16): the
    resident Q tile of Q K^T and the probabilities P of P V. Rows are split
    over the `warps` as in `#fa.mma`; each warp's rows are cut into 16 x 16
    fragments (the columns padded to a multiple of 16), of which lane
    `(g, t)` holds 8 elements in 4 registers:

    ```
    a0a1 (g, 2t..2t+1)    a4a5 (g, 2t+8..2t+9)
    a2a3 (g+8, 2t..)      a6a7 (g+8, 2t+8..)
    ```

    Two neighbouring 16 x 8 accumulator fragments of `#fa.mma` hold exactly
    the elements of one 16 x 16 operand fragment in the same lanes, so P
    goes from S's accumulator to the A operand of P V without leaving the
    registers.

    ```mlir
    tensor<128x128xf16, #fa.mma_operand<warps = 8>>  // 64 f16 a thread
    ```
  }];
  let parameters = (ins "int64_t":$warps);
  let assemblyFormat = "`<` `warps` `=` $warps `>`";
  let genVerifyDecl = 1;
}

def FA_SwizzledSharedEncodingAttr : AttrDef<FA_Dialect, "SwizzledSharedEncoding",
    [DeclareAttrInterfaceMethods<FA_TileEncodingInterface>,
     DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "swizzled_shared";
  let summary = "a tile in shared memory in the 128- or 64-byte swizzle";
  let description = [{
    The layout Hopper's wgmma descriptors (and the TMA engine) read with the
    128-byte swizzle: the tile's columns are cut into blocks of 128 bytes
    (64 16-bit elements, 32 f32); block `b` of an `R x C` tile is a region
    of `R` rows of 128 bytes, stored after block `b - 1`. In row `r`, the
    16-byte chunk `c` of the block (elements `8c .. 8c + 7` of 16 bits,
    `4c .. 4c + 3` of f32) is stored at chunk `c ^ (r % 8)`:

    ```
    chunk stored at:  c0 c1 c2 c3 c4 c5 c6 c7
      r0              0  1  2  3  4  5  6  7
      r1              1  0  3  2  5  4  7  6
      r2              2  3  0  1  6  7  4  5
      ...
      r7              7  6  5  4  3  2  1  0     (then r8 as r0)
    ```

    Eight rows form a 1024-byte atom; the 8 rows a wgmma core matrix (or a
    16-byte cp.async per lane of 8 lanes) touches in one chunk column fall
    into 8 different bank groups. Tiles start on 1024-byte boundaries.

    `bytes = 64` is the 64-byte swizzle, for 8-bit tiles whose rows are 64
    bytes (e4m3 at head dims that are not whole 128-byte rows): column
    blocks of 64 bytes (4 chunks), chunk `c` of row `r` stored at chunk
    `c ^ ((r / 2) % 4)`, 8 rows a 512-byte atom (the same bits of the
    address as the 128-byte swizzle: bits 4-5 xor bits 7-8). In general,
    chunk `c` is stored at `c ^ ((r / (128 / bytes)) % (bytes / 16))`.

    16-bit and 8-bit (f8E4M3FN) tiles are wgmma's operands; f32 tiles are
    staged for the TMA engine's reductions (the backward's dQ part).

    `transposed` (8-bit tiles): the tile is stored by columns, as its
    transpose would be by rows: storage row `c` holds column `c`, the tile's
    rows along it, in column blocks of 128 rows. 8-bit wgmma reads both
    shared operands K-major, so the B operand of P V (V, `[keys, D]`) is
    stored so: its rows (keys) along storage rows. Within each group of 32
    keys the storage columns hold the keys in the order in which a thread's
    8-bit A fragment of P holds them as the f32 accumulator left them:
    storage column `4t + i` (+16) holds key `2t + (i % 2) + 8 (i / 2)`
    (+16), so that P becomes an A operand without moving between lanes.

    ```mlir
    tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>  // 2 blocks of 16 KiB
    tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>   // 4 blocks of 8 KiB
    tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
    ```
  }];
  let parameters = (ins "int64_t":$bytes,
                        DefaultValuedParameter<"bool", "false">:$transposed);
  let assemblyFormat = "`<` `bytes` `=` $bytes (`,` `transposed` `=` $transposed^)? `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "int64_t":$bytes), [{
      return $_get($_ctxt, bytes, /*transposed=*/false);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Elements of one column block (one swizzled row).
    int64_t getBlockColumns(::mlir::Type elementType) const {
      return getBytes() * 8 / elementType.getIntOrFloatBitWidth();
    }
    /// Bytes of the 8-row atom the pattern repeats in.
    int64_t getAtomBytes() const { return 8 * getBytes(); }
  }];
}

#endif // FA_DIALECT_FADIALECT_TD
