//===- Variants.cpp - The built-in attention variants as spec text -*- C++ -*-===//
#include "lib/Variants.h"

#include <cstdio>

namespace fa::variants {

static const char *kScoreModSignature =
    "func.func @score_mod(%score: f32, %b: index, %h: index, %q: index, "
    "%kv: index, %q_len: index, %kv_len: index) -> f32 {\n";
static const char *kMaskModSignature =
    "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
    "%q_len: index, %kv_len: index) -> i1 {\n";

/// A double as an MLIR float literal that reads back exactly.
static std::string floatLiteral(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17e", value);
  return text;
}

/// The query's position among the keys: q + kv_len - q_len, as %diag.
static const char *kDiagonal =
    "  %shift = arith.subi %kv_len, %q_len : index\n"
    "  %diag = arith.addi %q, %shift : index\n";

std::string softcap(double cap) {
  return std::string(kScoreModSignature) +
         "  %cap = arith.constant " + floatLiteral(cap) + " : f32\n"
         "  %x = arith.divf %score, %cap : f32\n"
         "  %t = math.tanh %x : f32\n"
         "  %capped = arith.mulf %t, %cap : f32\n"
         "  return %capped : f32\n}\n";
}

/// ALiBi's step from the head's %slope: score - slope * |diag - kv|.
static const char *kAlibiBias =
    "  %d = arith.subi %diag, %kv : index\n"
    "  %di = arith.index_cast %d : index to i64\n"
    "  %df = arith.sitofp %di : i64 to f32\n"
    "  %dist = math.absf %df : f32\n"
    "  %bias = arith.mulf %slope, %dist : f32\n"
    "  %biased = arith.subf %score, %bias : f32\n"
    "  return %biased : f32\n}\n";

std::string alibi(int64_t numHeads) {
  return std::string(kScoreModSignature) + kDiagonal +
         "  %one = arith.constant 1 : index\n"
         "  %h1 = arith.addi %h, %one : index\n"
         "  %hi = arith.index_cast %h1 : index to i64\n"
         "  %hf = arith.sitofp %hi : i64 to f32\n"
         "  %step = arith.constant " + floatLiteral(-8.0 / double(numHeads)) +
         " : f32\n"
         "  %e = arith.mulf %hf, %step : f32\n"
         "  %slope = math.exp2 %e : f32\n"
         + std::string(kAlibiBias);
}

std::string slidingWindow(int64_t left, int64_t right) {
  std::string text = std::string(kMaskModSignature) + kDiagonal +
                     "  %true = arith.constant true\n";
  std::string keep = "%true";
  if (left >= 0) {
    text += "  %left = arith.constant " + std::to_string(left) + " : index\n"
            "  %lo = arith.subi %diag, %left : index\n"
            "  %after = arith.cmpi sge, %kv, %lo : index\n"
            "  %keep_lo = arith.andi " + keep + ", %after : i1\n";
    keep = "%keep_lo";
  }
  if (right >= 0) {
    text += "  %right = arith.constant " + std::to_string(right) +
            " : index\n"
            "  %hi = arith.addi %diag, %right : index\n"
            "  %before = arith.cmpi sle, %kv, %hi : index\n"
            "  %keep_hi = arith.andi " + keep + ", %before : i1\n";
    keep = "%keep_hi";
  }
  return text + "  return " + keep + " : i1\n}\n";
}

std::string prefixLm(int64_t prefix) {
  return std::string(kMaskModSignature) + kDiagonal +
         "  %n = arith.constant " + std::to_string(prefix) + " : index\n"
         "  %in_prefix = arith.cmpi slt, %kv, %n : index\n"
         "  %causal = arith.cmpi sle, %kv, %diag : index\n"
         "  %keep = arith.ori %in_prefix, %causal : i1\n"
         "  return %keep : i1\n}\n";
}

std::string sameChunk(int64_t chunk) {
  return std::string(kMaskModSignature) + kDiagonal +
         "  %c = arith.constant " + std::to_string(chunk) + " : index\n"
         "  %qc = arith.floordivsi %diag, %c : index\n"
         "  %kc = arith.floordivsi %kv, %c : index\n"
         "  %keep = arith.cmpi eq, %qc, %kc : index\n"
         "  return %keep : i1\n}\n";
}

std::string document() {
  return "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
         "%q_len: index, %kv_len: index, %doc: memref<?x?xi32>) -> i1 {\n" +
         std::string(kDiagonal) +
         // Rows above the first key (Sq > Sk) are in no document.
         "  %zero = arith.constant 0 : index\n"
         "  %inside = arith.cmpi sge, %diag, %zero : index\n"
         "  %row = arith.maxsi %diag, %zero : index\n"
         "  %qdoc = memref.load %doc[%b, %row] : memref<?x?xi32>\n"
         "  %kdoc = memref.load %doc[%b, %kv] : memref<?x?xi32>\n"
         "  %same = arith.cmpi eq, %qdoc, %kdoc : i32\n"
         "  %keep = arith.andi %inside, %same : i1\n"
         "  return %keep : i1\n}\n";
}

std::string scoreBias() {
  return "func.func @score_mod(%score: f32, %b: index, %h: index, %q: index, "
         "%kv: index, %q_len: index, %kv_len: index, "
         "%bias: memref<?x?x?xf16>) -> f32 {\n"
         "  %x = memref.load %bias[%h, %q, %kv] : memref<?x?x?xf16>\n"
         "  %xf = arith.extf %x : f16 to f32\n"
         "  %biased = arith.addf %score, %xf : f32\n"
         "  return %biased : f32\n}\n";
}

std::string alibiSlopes() {
  return "func.func @score_mod(%score: f32, %b: index, %h: index, %q: index, "
         "%kv: index, %q_len: index, %kv_len: index, "
         "%slopes: memref<?xf32>) -> f32 {\n" +
         std::string(kDiagonal) +
         "  %slope = memref.load %slopes[%h] : memref<?xf32>\n"
         + std::string(kAlibiBias);
}

} // namespace fa::variants
