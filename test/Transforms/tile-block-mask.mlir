// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=16 block-n=32" | FileCheck %s --check-prefix=BWD

// A block mask through the tiling: the problem's key ranges go to the K/V
// range op with the program's batch and head (a mask that reads a captured
// tensor narrows nothing by itself: the table is what skips tiles), and
// to fa.whole_range over the tile's rows [q_start, min(q_start + 16,
// Sq)): a K/V tile inside the keys they all keep is kept whole (the mask
// skips the mask_mod there; the bounds in i32, made before the loop);
// elsewhere the per-element mask still reads the document ids.
// CHECK-LABEL: func @document
// CHECK-SAME: %[[DOC:[a-z0-9_]+]]: memref<?x?xi32>, %[[KR:[a-z0-9_]+]]: memref<?x?x?x4xi32>
// CHECK: fa.grid
// CHECK: %[[QSTART:.*]] = arith.muli
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %[[KR]] : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// CHECK-NOT: mask_mod
// CHECK: %[[ROWSEND:.*]] = arith.minsi
// CHECK: %[[LO:.*]], %[[HI:.*]] = fa.whole_range %[[QSTART]], %[[ROWSEND]] at(%{{.*}}, %{{.*}}) ranges %[[KR]] : memref<?x?x?x4xi32>
// CHECK: %[[LO32:.*]] = arith.index_cast %[[LO]] : index to i32
// CHECK: %[[HI32:.*]] = arith.index_cast %[[HI]] : index to i32
// CHECK: scf.for %[[KV:.*]] = %[[BEGIN]] to %[[END]]
// CHECK: %[[KVSTART:.*]] = arith.muli %[[KV]]
// CHECK: %[[KVSTART32:.*]] = arith.index_cast %[[KVSTART]] : index to i32
// CHECK: %[[KVEND:.*]] = arith.addi %[[KVSTART32]], %{{.*}} : i32
// CHECK: %[[FROMLO:.*]] = arith.cmpi sle, %[[LO32]], %[[KVSTART32]] : i32
// CHECK: %[[TOHI:.*]] = arith.cmpi sle, %[[KVEND]], %[[HI32]] : i32
// CHECK: %[[WHOLE:.*]] = arith.andi %[[FROMLO]], %[[TOHI]]
// CHECK: fa.mask {{.*}} captures(%[[DOC]] : memref<?x?xi32>) kept_whole %[[WHOLE]] {mask = #fa.mask<causal>} : tensor<16x32xf32> mask_mod {
func.func @document(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                    %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                    %lse: memref<?x2x?xf32>, %doc: memref<?x?xi32>,
                    %kr: memref<?x?x?x4xi32>) {
  fa.attention %q, %k, %v into %o, %lse key_ranges %kr {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32> key_ranges memref<?x?x?x4xi32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}

// The backward's query ranges: the query tile range and the rows that
// keep every key of the K/V tile are taken per query head (the table is
// indexed by it), inside the head loop; a query tile inside those rows is
// kept whole.
// BWD-LABEL: func @document_backward
// BWD-SAME: %[[QR:[a-z0-9_]+]]: memref<?x?x?x4xi32>
// BWD: fa.grid
// BWD: fa.grid
// BWD: scf.for
// BWD: %[[BEGIN:.*]], %[[END:.*]] = fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %[[QR]] : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
// BWD: %[[LO:.*]], %[[HI:.*]] = fa.whole_range %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %[[QR]] : memref<?x?x?x4xi32>
// BWD: %[[LO32:.*]] = arith.index_cast %[[LO]] : index to i32
// BWD: scf.for %{{.*}} = %[[BEGIN]] to %[[END]]
// BWD: arith.cmpi sle, %[[LO32]], %{{.*}} : i32
// BWD: fa.mask {{.*}} kept_whole %{{.*}} : tensor<16x32xf32> mask_mod {
func.func @document_backward(
    %q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
    %o: memref<?x2x?x32xf32>, %lse: memref<?x2x?xf32>, %delta: memref<?x2x?xf32>,
    %acc: memref<?x2x?x32xf32>, %doc: memref<?x?xi32>, %qr: memref<?x?x?x4xi32>) {
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc query_ranges %qr {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
      memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    workspace memref<?x2x?xf32>, memref<?x2x?x32xf32> query_ranges memref<?x?x?x4xi32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}

// -----

// The deterministic backward with a block mask (causal: the turns run last
// to first, as the grid does). At each visited query tile the K/V tile
// takes a turn only where the query tile's key ranges give it the tile
// (`taken`); it waits for the turn of the tile before it in that order
// among those both tables give the query tile (fa.previous_visitor, which
// asks the other K/V tiles' query ranges: the same table and mask as this
// loop's range), and hands on its own rank: tiles - 1 - j.
// BWD-LABEL: func @document_deterministic
// BWD-SAME: %[[QR:[a-z0-9_]+]]: memref<?x?x?x4xi32>, %[[KR:[a-z0-9_]+]]: memref<?x?x?x4xi32>
// BWD: fa.grid
// BWD: %[[TILES:.*]] = arith.ceildivui
// BWD: fa.grid
// BWD: %[[LASTTILE:.*]] = arith.subi %[[TILES]], %{{.*}}
// BWD: %[[KVTILE:.*]] = arith.subi %[[LASTTILE]], %{{.*}}
// BWD: scf.for
// BWD: fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %[[H:.*]]) ranges %[[QR]] : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// BWD: scf.for %[[QTILE:[a-z0-9_]+]] =
// BWD: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %[[H]]) ranges %[[KR]] : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// BWD: %[[FROM:.*]] = arith.cmpi ule, %[[BEGIN]], %[[KVTILE]]
// BWD: %[[BEFORE:.*]] = arith.cmpi ult, %[[KVTILE]], %[[END]]
// BWD: %[[TAKEN:.*]] = arith.andi %[[FROM]], %[[BEFORE]]
// BWD: %[[FOUND:.*]], %[[PREV:.*]] = fa.previous_visitor %[[QTILE]], %[[KVTILE]] in [%[[BEGIN]], %[[END]]), %{{.*}}, %{{.*}} at(%{{.*}}, %[[H]]) ranges %[[QR]] : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, descending, mask = #fa.mask<causal>}
// BWD: %[[MINE:.*]] = arith.subi %{{.*}}, %[[KVTILE]]
// BWD: %[[THEIRS:.*]] = arith.subi %{{.*}}, %[[PREV]]
// BWD: %[[AFTER:.*]] = arith.addi %[[THEIRS]], %{{.*}}
// BWD: %[[WAIT:.*]] = arith.select %[[FOUND]], %[[AFTER]], %{{.*}}
// BWD: fa.wait_turn %{{.*}}[%{{.*}}, %{{.*}}, %[[QTILE]]], %[[WAIT]] if %[[TAKEN]]
// BWD-NEXT: fa.accumulate_tile
// BWD-NEXT: fa.pass_turn %{{.*}}[%{{.*}}, %{{.*}}, %[[QTILE]]], %[[MINE]] if %[[TAKEN]]
func.func @document_deterministic(
    %q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
    %o: memref<?x2x?x32xf32>, %lse: memref<?x2x?xf32>, %delta: memref<?x2x?xf32>,
    %acc: memref<?x2x?x32xf32>, %order: memref<?x2x?xi32>, %doc: memref<?x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc, %order query_ranges %qr key_ranges %kr
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
      memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    workspace memref<?x2x?xf32>, memref<?x2x?x32xf32>, memref<?x2x?xi32>
    query_ranges memref<?x?x?x4xi32> key_ranges memref<?x?x?x4xi32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}

// -----

// Without the causal mask the deterministic block-mask turns run last to
// first too: a block mask's visits form a band (documents), and in that
// order the longest chain of waits is its width, not the diagonal.
// BWD-LABEL: func @document_deterministic_full
// BWD: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c32
// BWD: fa.grid
// BWD: %[[LASTTILE:.*]] = arith.subi %[[TILES]], %{{.*}}
// BWD-NEXT: %[[KVTILE:.*]] = arith.subi %[[LASTTILE]], %{{.*}}
// BWD: fa.previous_visitor %{{.*}}, %[[KVTILE]] in [%{{.*}}, %{{.*}}), %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, descending}
// BWD: %[[MINE:.*]] = arith.subi %{{.*}}, %[[KVTILE]]
// BWD: fa.pass_turn %{{.*}}, %[[MINE]] if
func.func @document_deterministic_full(
    %q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
    %o: memref<?x2x?x32xf32>, %lse: memref<?x2x?xf32>, %delta: memref<?x2x?xf32>,
    %acc: memref<?x2x?x32xf32>, %order: memref<?x2x?xi32>, %doc: memref<?x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc, %order query_ranges %qr key_ranges %kr
      {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
      memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    workspace memref<?x2x?xf32>, memref<?x2x?x32xf32>, memref<?x2x?xi32>
    query_ranges memref<?x?x?x4xi32> key_ranges memref<?x?x?x4xi32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}
