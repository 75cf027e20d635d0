// RUN: fa-opt %s --fa-tile="block-m=16 block-n=32" | FileCheck %s
// RUN: fa-opt %s --fa-tile="block-m=16 block-n=32" --fa-lower-tiles-to-linalg | FileCheck %s --check-prefix=RANGE

// A variant through the tiling: the score_mod becomes fa.score_mod on each
// S tile (scaled there, so the online softmax runs with scale 1), then the
// mask with the mask_mod; the K/V range carries the mask_mod too.
// CHECK-LABEL: func @softcap_window
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: fa.kv_tile_range {{.*}} at(%[[B]], %[[H]]) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK: scf.for
// CHECK: %[[S:.*]] = fa.tile_matmul
// CHECK: %[[MOD:.*]] = fa.score_mod %[[S]], {{.*}} at(%[[B]], %[[H]]) {scale = 1.250000e-01 : f32}
// CHECK: math.tanh %{{.*}} : f32
// CHECK: %[[MASKED:.*]] = fa.mask %[[MOD]], {{.*}} at(%[[B]], %[[H]]) {{.*}} mask_mod {
// CHECK: fa.online_softmax %[[MASKED]], {{.*}} {scale = 1.000000e+00 : f32}

// The window's K/V range per query tile [q0, q1] (q1 = min(q0 + 16, Sq) - 1):
// keys kv >= q - 256 and kv <= q give tiles floor((q0 - 256) / 32) ..
// floor(q1 / 32), clamped to [0, ceil(Sk / 32)).
// RANGE-LABEL: func @softcap_window
// RANGE: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c32
// RANGE: %[[Q1END:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// RANGE: %[[Q1:.*]] = arith.subi %[[Q1END]], %c1
// RANGE: %[[LO:.*]] = arith.addi %c-256{{.*}}, %[[Q0:.*]] : index
// RANGE: %[[HI:.*]] = arith.subi %c0{{.*}}, %{{.*}} : index
// RANGE: %[[FIRST:.*]] = arith.floordivsi %[[LO]], %c32
// RANGE: %[[BEGIN:.*]] = arith.maxsi %c0{{.*}}, %[[FIRST]]
// RANGE: %[[LAST:.*]] = arith.floordivsi %[[HI]], %c32
// RANGE: %[[AFTER:.*]] = arith.addi %[[LAST]], %c1
// RANGE: %[[CLAMPED:.*]] = arith.minsi %[[TILES]], %[[AFTER]]
// RANGE: %[[END:.*]] = arith.maxsi %[[CLAMPED]], %[[BEGIN]]
// RANGE: scf.for %{{.*}} = %[[BEGIN]] to %[[END]]
func.func @softcap_window(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                          %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                          %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c = arith.constant 256 : index
      %lo = arith.subi %qi, %c : index
      %after = arith.cmpi sge, %ki, %lo : index
      %before = arith.cmpi sle, %ki, %qi : index
      %keep = arith.andi %after, %before : i1
      fa.yield %keep : i1
    }
  return
}

// Sink tokens and a window (kv < 4, or q - 64 <= kv <= q): the hull of the
// two key intervals is every key up to the row, so the K/V loop skips the
// tiles between them (fa.kv_tile_hole) and runs over the visits: the
// range's tiles less the hole's, visit v being tile v below the hole and
// v + (hole_end - hole_begin) from it on.
// CHECK-LABEL: func @sinks_window
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range
// CHECK: %[[HB:.*]], %[[HE:.*]] = fa.kv_tile_hole %[[BEGIN]], %[[END]] of {{.*}} {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK: %[[HOLE:.*]] = arith.subi %[[HE]], %[[HB]]
// CHECK: %[[VISITS:.*]] = arith.subi %[[END]], %[[HOLE]]
// CHECK: scf.for %[[V:.*]] = %[[BEGIN]] to %[[VISITS]]
// CHECK: %[[PAST:.*]] = arith.cmpi sge, %[[V]], %[[HB]]
// CHECK: %[[SKIP:.*]] = arith.subi %[[HE]], %[[HB]]
// CHECK: %[[SKIPPED:.*]] = arith.select %[[PAST]], %[[SKIP]], %c0
// CHECK: %[[TILE:.*]] = arith.addi %[[V]], %[[SKIPPED]]
// CHECK: arith.muli %[[TILE]], %c32

// The hole: past the sinks' last key (min of the two intervals' ends, + 1)
// up to the window's first key (q0 - 64; the max of their starts), in
// whole tiles (ceil / floor by 32), inside the range.
// RANGE-LABEL: func @sinks_window
// RANGE: %[[GAPEND:.*]] = arith.maxsi %c-1099511627776{{.*}}, %{{.*}} : index
// RANGE: arith.cmpi sle
// RANGE: arith.cmpi sle
// RANGE: %[[BOTH:.*]] = arith.andi
// RANGE: %[[GAP:.*]] = arith.select %[[BOTH]], %[[GAPEND]], %[[START:.*]] : index
// RANGE: %[[FIRST:.*]] = arith.ceildivsi %[[START]], %c32
// RANGE: %[[LAST:.*]] = arith.floordivsi %[[GAP]], %c32
// RANGE: %[[HB:.*]] = arith.minsi %{{.*}}, %[[END:.*]] : index
// RANGE: %[[HE:.*]] = arith.maxsi %{{.*}}, %[[HB]] : index
// RANGE: %[[HOLE:.*]] = arith.subi %[[HE]], %[[HB]]
// RANGE: %[[VISITS:.*]] = arith.subi %[[END]], %[[HOLE]]
// RANGE: scf.for %{{.*}} = %{{.*}} to %[[VISITS]]
func.func @sinks_window(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                        %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                        %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c4 = arith.constant 4 : index
      %sink = arith.cmpi slt, %ki, %c4 : index
      %c = arith.constant 64 : index
      %lo = arith.subi %qi, %c : index
      %after = arith.cmpi sge, %ki, %lo : index
      %before = arith.cmpi sle, %ki, %qi : index
      %window = arith.andi %after, %before : i1
      %keep = arith.ori %sink, %window : i1
      fa.yield %keep : i1
    }
  return
}

// Prefix-LM (kv < 32, or kv <= q): the second interval has no first key,
// so the two always meet: no hole, the loop runs over the range.
// CHECK-LABEL: func @prefix_lm
// CHECK: %[[PBEGIN:.*]], %[[PEND:.*]] = fa.kv_tile_range
// CHECK-NOT: fa.kv_tile_hole
// CHECK: scf.for %{{.*}} = %[[PBEGIN]] to %[[PEND]]
func.func @prefix_lm(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                     %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c32 = arith.constant 32 : index
      %prompt = arith.cmpi slt, %ki, %c32 : index
      %causal = arith.cmpi sle, %ki, %qi : index
      %keep = arith.ori %prompt, %causal : i1
      fa.yield %keep : i1
    }
  return
}
