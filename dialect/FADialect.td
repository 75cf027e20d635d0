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

def FA_Dialect : Dialect {
  let name = "fa";
  let cppNamespace = "::mlir::fa";
  let summary = "FlashAttention: attention problems and their tiled algorithm";
  let description = [{
    The `fa` dialect carries an attention computation from its mathematical
    statement down to the tiled, online-softmax form that a GPU kernel runs.

    * Problem level: `fa.attention` reads Q, K, V buffers and writes O and the
      per-row log-sum-exp (LSE) kept for the backward pass.
    * Tile level: `fa.grid` runs one program per (batch, query head, query
      tile). The program keeps its Q tile resident, streams K/V tiles through
      an `scf.for` that carries the online-softmax state (running max `m`,
      running sum `l`, unnormalized accumulator `acc`), and normalizes once
      at the end (FlashAttention-2's deferred normalization).
  }];
  let useDefaultAttributePrinterParser = 1;
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

#endif // FA_DIALECT_FADIALECT_TD
