// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu | FileCheck %s

// The element-wise tile ops are lowered once, against the register layout
// the tile's encoding describes (TileEncodingInterface::getRegisterLayout):
// the same pattern serves #fa.blocked (simt) and #fa.mma (mma, wgmma); only
// the layout's data differs: which row slot each register slot belongs to,
// the column offset of each slot, and the lanes that share a row.

// #fa.blocked<threads = [8, 4]> on 16 x 8: thread t holds rows t / 4 and
// t / 4 + 8 (row slots 0, 1), columns t % 4 and t % 4 + 4: slots 0, 1 in
// row slot 0, slots 2, 3 in row slot 1; the 4 threads of a row are lanes
// t ^ 2 and t ^ 1.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @blocked
func.func @blocked(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %acc = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    %f = arith.constant dense<2.0> : tensor<16xf32, #blocked>
    // acc *= factor of the slot's row.
    // CHECK: %[[F0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<2xf32>
    // CHECK: %[[F1:.*]] = vector.extract %{{.*}}[1] : f32 from vector<2xf32>
    // CHECK: arith.mulf %{{.*}}, %[[F0]]
    // CHECK: arith.mulf %{{.*}}, %[[F0]]
    // CHECK: arith.mulf %{{.*}}, %[[F1]]
    // CHECK: arith.mulf %{{.*}}, %[[F1]]
    %r = fa.rescale %acc, %f : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
    // Row max: the thread's two scores of the row, then lanes ^2, ^1.
    // CHECK: arith.maximumf
    // CHECK: %[[M2:.*]] = arith.constant 2 : i32
    // CHECK: gpu.shuffle xor %{{.*}}, %[[M2]]
    // CHECK: %[[M1:.*]] = arith.constant 1 : i32
    // CHECK: gpu.shuffle xor %{{.*}}, %[[M1]]
    %mn, %p, %l, %a = fa.online_softmax %r, %f, %f {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// fa.skip_unit_factors: the thread's rows whose factor is not 1, voted
// across the warp; the products only in the branch a moved row takes, the
// accumulator as it was in the other.
#acc = #fa.mma<warps = 1>
// CHECK-LABEL: gpu.func @skip_unit_factors
func.func @skip_unit_factors(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x16xf32, #acc>
    %f = arith.constant dense<2.0> : tensor<16xf32, #acc>
    // CHECK: %[[ACC0:.*]] = arith.constant dense<1.000000e+00> : vector<8xf32>
    // CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
    // CHECK: %[[NONE:.*]] = arith.constant false
    // CHECK: %[[R0:.*]] = arith.cmpf une, %{{.*}}, %[[ONE]] : f32
    // CHECK: %[[M0:.*]] = arith.ori %[[NONE]], %[[R0]] : i1
    // CHECK: %[[R1:.*]] = arith.cmpf une, %{{.*}}, %[[ONE]] : f32
    // CHECK: %[[MOVED:.*]] = arith.ori %[[M0]], %[[R1]] : i1
    // CHECK: %[[WARP:.*]] = arith.constant -1 : i32
    // CHECK: %[[ANY:.*]] = nvvm.vote.sync any %[[WARP]], %[[MOVED]] -> i1
    // CHECK: %[[ACC:.*]] = scf.if %[[ANY]] -> (vector<8xf32>) {
    // CHECK-COUNT-8: arith.mulf
    // CHECK: scf.yield
    // CHECK: } else {
    // CHECK-NEXT: scf.yield %[[ACC0]] : vector<8xf32>
    // CHECK: }
    %r = fa.rescale %s, %f {fa.skip_unit_factors} : tensor<16x16xf32, #acc>, tensor<16xf32, #acc>
    // The marked softmax's correction: exp2((m - m_new) log2 e), exactly 1
    // where the max did not move (unmarked: one FMA, m log2 e - m_new log2 e).
    // CHECK: %[[BASE:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
    // CHECK: %[[DM:.*]] = arith.subf %{{.*}}, %[[BASE]] : f32
    // CHECK: %[[DML:.*]] = arith.mulf %[[DM]], %{{.*}} : f32
    // CHECK: math.exp2 %[[DML]] : f32
    %mn, %p, %l, %a = fa.online_softmax %r, %f, %f {scale = 1.0 : f32, fa.skip_unit_factors} : tensor<16x16xf32, #acc>, tensor<16xf32, #acc>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// #fa.mma<warps = 1> on 16 x 16: lane (g, t) holds elements e = 0..3 of
// two n8 blocks; e = 0, 1 sit in row g (row slot 0), e = 2, 3 in row g + 8
// (row slot 1), at columns 2t + 8 ni + (e % 2); a quad (lanes ^1, ^2)
// shares a row.
#acc = #fa.mma<warps = 1>
// CHECK-LABEL: gpu.func @mma
func.func @mma(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x16xf32, #acc>
    %f = arith.constant dense<2.0> : tensor<16xf32, #acc>
    // acc *= factor of the slot's row: slots 0, 1 row slot 0; 2, 3 row
    // slot 1; 4, 5 row slot 0 ...
    // CHECK: %[[F0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<2xf32>
    // CHECK: %[[F1:.*]] = vector.extract %{{.*}}[1] : f32 from vector<2xf32>
    // CHECK: arith.mulf %{{.*}}, %[[F0]]
    // CHECK: arith.mulf %{{.*}}, %[[F0]]
    // CHECK: arith.mulf %{{.*}}, %[[F1]]
    // CHECK: arith.mulf %{{.*}}, %[[F1]]
    // CHECK: arith.mulf %{{.*}}, %[[F0]]
    %r = fa.rescale %s, %f : tensor<16x16xf32, #acc>, tensor<16xf32, #acc>
    // Row max: the thread's 4 scores of the row, then lanes ^1, ^2.
    // CHECK-COUNT-3: arith.maximumf
    // CHECK: %[[M1:.*]] = arith.constant 1 : i32
    // CHECK: gpu.shuffle xor %{{.*}}, %[[M1]]
    // CHECK: %[[M2:.*]] = arith.constant 2 : i32
    // CHECK: gpu.shuffle xor %{{.*}}, %[[M2]]
    // The correction (unmarked): one FMA, m log2 e - m_new log2 e, after
    // the row sum's shuffles.
    // CHECK: %[[NEGBASE:.*]] = arith.negf %{{.*}} : f32
    // CHECK: gpu.shuffle xor
    // CHECK: gpu.shuffle xor
    // CHECK: %[[AL:.*]] = math.fma %{{.*}}, %{{.*}}, %[[NEGBASE]] : f32
    // CHECK-NEXT: math.exp2 %[[AL]] : f32
    %mn, %p, %l, %a = fa.online_softmax %r, %f, %f {scale = 1.0 : f32} : tensor<16x16xf32, #acc>, tensor<16xf32, #acc>
    // The tail mask: column offsets 0, 1 (n8 block 0), 8, 9 (block 1) of
    // row slot 0 compared with the row's last visible column.
    // CHECK: scf.if
    // CHECK: arith.constant 0 : i32
    // CHECK: arith.cmpi sgt
    // CHECK: arith.constant 1 : i32
    // CHECK: arith.cmpi sgt
    // CHECK: arith.constant 8 : i32
    // CHECK: arith.cmpi sgt
    // CHECK: arith.constant 9 : i32
    // CHECK: arith.cmpi sgt
    %masked = fa.mask %s, %n, %n, %n, %n {mask = #fa.mask<none>} : tensor<16x16xf32, #acc>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// A variant on #fa.blocked<threads = [8, 4]> (16 x 8): the score_mod runs
// on each of the thread's 4 scores after the scale, with the score's row
// (q_start + t / 4, + 8) and column (kv_start + t % 4, + 4); the mask_mod's
// tile test (kept whole: the largest kv - q over the tile <= 0) joins the
// key-tail test that decides the per-element branch. kv <= q keeps an
// interval of keys per row: the row's last kept key (min with q) bounds
// the one compare per score, as the causal mask does; the region is not
// evaluated per score.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @variant
func.func @variant(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
    // CHECK: %[[SCALED:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
    // CHECK: math.tanh %[[SCALED]]
    // CHECK-COUNT-3: math.tanh
    %m = fa.score_mod %s, %q0, %k0, %n, %n at(%b, %h) {scale = 0.5 : f32} : tensor<16x8xf32, #blocked> {
    ^bb0(%x: f32, %bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %y = math.tanh %x : f32
      fa.yield %y : f32
    }
    // Whole tile: kv_start + 7 - q_start <= 0, negated, or'ed with the tail.
    // CHECK: %[[TAIL:.*]] = arith.cmpi uge
    // CHECK: %[[WHOLE:.*]] = arith.cmpi sle
    // CHECK: %[[PARTIAL:.*]] = arith.xori %[[WHOLE]], %true
    // CHECK: %[[NEEDS:.*]] = arith.ori %[[TAIL]], %[[PARTIAL]]
    // CHECK: scf.if %[[NEEDS]]
    // CHECK: arith.minsi
    // CHECK-COUNT-2: arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
    // CHECK: arith.minsi
    // CHECK-COUNT-2: arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
    // CHECK-NOT: arith.cmpi sle, %{{.*}}, %{{.*}} : index
    // CHECK: } else {
    %r = fa.mask %m, %q0, %k0, %n, %n at(%b, %h) : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// A window's first kept key (kv >= q - 3): the row's bound minus the
// thread's column base is saturated to +-2^30 and narrowed to 32 bits
// before the tile's first key is subtracted (loop-invariant, one register
// per row once hoisted), then clamped to [-1, C]; each score costs a second
// compare, slt, against it.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @window_first_key
func.func @window_first_key(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: scf.if
    // CHECK: %[[LO:.*]] = arith.maxsi %{{.*}}, %c-1073741824 : index
    // CHECK: %[[HI:.*]] = arith.minsi %[[LO]], %c1073741824 : index
    // CHECK: %[[NARROW:.*]] = arith.index_cast %[[HI]] : index to i32
    // CHECK: %[[START:.*]] = arith.index_cast %{{.*}} : index to i32
    // CHECK: %[[REL:.*]] = arith.subi %[[NARROW]], %[[START]] : i32
    // CHECK: %[[CLAMPLO:.*]] = arith.maxsi %[[REL]], %c-1_i32 : i32
    // CHECK: %[[FIRST:.*]] = arith.minsi %[[CLAMPLO]], %c8_i32 : i32
    // CHECK: arith.cmpi slt, %{{.*}}, %[[FIRST]] : i32
    // CHECK: arith.cmpi slt, %{{.*}}, %[[FIRST]] : i32
    // CHECK: } else {
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c3 = arith.constant 3 : index
      %lo = arith.subi %qi, %c3 : index
      %keep = arith.cmpi sge, %ki, %lo : index
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// Under the causal mask a window's right edge at the diagonal (kv <= q +
// Sk - Sq, as fa.variants.sliding_window(left, 0) writes it) is what the
// causal compare already tests: the row's last key is the causal one alone
// (one minsi per row, no second bound), the window adds only its first key.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @causal_window
func.func @causal_window(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: scf.if
    // CHECK: arith.minsi %{{.*}}, %{{.*}} : index
    // CHECK-NOT: arith.minsi %{{.*}}, %{{.*}} : index
    // CHECK: arith.maxsi %{{.*}}, %c-1{{.*}} : index
    // CHECK: arith.minsi %{{.*}}, %c8{{.*}} : index
    // CHECK: arith.maxsi %{{.*}}, %c-1073741824 : index
    // CHECK: arith.minsi %{{.*}}, %c1073741824 : index
    // CHECK: arith.cmpi sgt
    // CHECK-NEXT: arith.cmpi slt
    // CHECK: } else {
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) {mask = #fa.mask<causal>} : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %shift = arith.subi %sk, %sq : index
      %diag = arith.addi %qi, %shift : index
      %c3 = arith.constant 3 : index
      %lo = arith.subi %diag, %c3 : index
      %after = arith.cmpi sge, %ki, %lo : index
      %before = arith.cmpi sle, %ki, %diag : index
      %keep = arith.andi %after, %before : i1
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// Sink tokens and a causal window (kv < 4, or q - 3 <= kv <= q): two key
// intervals per row. Each is compared as a window is (its first and last
// key relative to the thread's first column, in 32 bits); the window's
// right edge is the causal mask's and drops out; the region is not
// evaluated per score. Per score: the causal compare, one compare per
// interval's bound, and the union.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @sinks_window
func.func @sinks_window(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: scf.if
    // The row's last visible key (causal), the sinks' last key (3) and the
    // window's first, each from the thread's first column, in [-1, 8].
    // CHECK: %[[VISIBLE:.*]] = arith.index_cast %{{.*}} : index to i32
    // CHECK: %[[SINKS_LAST:.*]] = arith.index_cast %{{.*}} : index to i32
    // CHECK: %[[WINDOW_FIRST:.*]] = arith.minsi %{{.*}}, %c8_i32 : i32
    // CHECK: %[[C0:.*]] = arith.constant 0 : i32
    // CHECK-NEXT: %[[CAUSAL:.*]] = arith.cmpi sgt, %[[C0]], %[[VISIBLE]] : i32
    // CHECK-NEXT: %[[IN_SINKS:.*]] = arith.cmpi sle, %[[C0]], %[[SINKS_LAST]] : i32
    // CHECK-NEXT: %[[IN_WINDOW:.*]] = arith.cmpi sge, %[[C0]], %[[WINDOW_FIRST]] : i32
    // CHECK-NEXT: %[[IN_ONE:.*]] = arith.ori %[[IN_SINKS]], %[[IN_WINDOW]] : i1
    // CHECK-NEXT: %[[TRUE:.*]] = arith.constant true
    // CHECK-NEXT: %[[OUT:.*]] = arith.xori %[[IN_ONE]], %[[TRUE]] : i1
    // CHECK-NEXT: %[[HIDDEN:.*]] = arith.ori %[[CAUSAL]], %[[OUT]] : i1
    // CHECK-NEXT: arith.select %[[HIDDEN]]
    // CHECK-NOT: arith.cmpi {{.*}} : index
    // CHECK: } else {
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) {mask = #fa.mask<causal>} : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c4 = arith.constant 4 : index
      %sink = arith.cmpi slt, %ki, %c4 : index
      %shift = arith.subi %sk, %sq : index
      %diag = arith.addi %qi, %shift : index
      %c3 = arith.constant 3 : index
      %lo = arith.subi %diag, %c3 : index
      %after = arith.cmpi sge, %ki, %lo : index
      %before = arith.cmpi sle, %ki, %diag : index
      %window = arith.andi %after, %before : i1
      %keep = arith.ori %sink, %window : i1
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// Chunked attention (the query's chunk of 64 positions, aligned
// bottom-right, equals the key's): the equality is two constraints with
// floor terms, and a tile whose rows and keys all lie in one chunk keeps
// every score: the largest chunk difference over the tile, each way, is
// <= 0 (floordivsi of the box's corners), and only the other tiles take
// the per-element branch.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @chunked
func.func @chunked(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: %[[TAIL:.*]] = arith.cmpi uge
    // CHECK: arith.floordivsi %{{.*}}, %c64
    // CHECK: arith.floordivsi %{{.*}}, %c64
    // CHECK: %[[ONE:.*]] = arith.cmpi sle
    // CHECK: arith.floordivsi %{{.*}}, %c64
    // CHECK: arith.floordivsi %{{.*}}, %c64
    // CHECK: %[[OTHER:.*]] = arith.cmpi sle
    // CHECK: %[[WHOLE:.*]] = arith.andi %[[ONE]], %[[OTHER]]
    // CHECK: %[[PARTIAL:.*]] = arith.xori %[[WHOLE]], %true
    // CHECK: %[[NEEDS:.*]] = arith.ori %[[TAIL]], %[[PARTIAL]]
    // CHECK: scf.if %[[NEEDS]]
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c64 = arith.constant 64 : index
      %shift = arith.subi %sk, %sq : index
      %pos = arith.addi %qi, %shift : index
      %qc = arith.floordivsi %pos, %c64 : index
      %kc = arith.floordivsi %ki, %c64 : index
      %keep = arith.cmpi eq, %qc, %kc : index
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// A mask_mod that is not affine (a remainder) is evaluated at every score
// of every tile: no whole-tile shortcut, the region per score.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @not_affine
func.func @not_affine(%n: index, %q0: index, %k0: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: %[[TAIL:.*]] = arith.cmpi uge
    // CHECK: %[[NEEDS:.*]] = arith.ori %[[TAIL]], %true
    // CHECK: scf.if %[[NEEDS]]
    // CHECK-COUNT-4: arith.remsi
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c3 = arith.constant 3 : index
      %m = arith.remsi %ki, %c3 : index
      %c0 = arith.constant 0 : index
      %keep = arith.cmpi ne, %m, %c0 : index
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %a = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// A mask_mod that reads a captured tensor: its loads clamp each index to
// the tensor's last (so that padding rows and keys read inside it) and are
// marked fa.capture_load, and the per-element branch
// fa.hoist_capture_loads, so that fa-hoist-capture-loads may issue them
// before the scores arrive.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @document
func.func @document(%n: index, %q0: index, %k0: index, %doc: memref<?x?xi32>) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: scf.if
    // CHECK: %[[BATCHES:.*]] = memref.dim %[[DOC:.*]], %c0
    // CHECK: %[[LAST_BATCH:.*]] = arith.subi %[[BATCHES]], %c1
    // CHECK: %[[BATCH:.*]] = arith.minui %block_id_z, %[[LAST_BATCH]]
    // CHECK: %[[KEYS:.*]] = memref.dim %[[DOC]], %c1
    // CHECK: %[[LAST_KEY:.*]] = arith.subi %[[KEYS]], %c1
    // CHECK: %[[KEY:.*]] = arith.minui %{{.*}}, %[[LAST_KEY]]
    // CHECK: memref.load %[[DOC]][%[[BATCH]], %[[KEY]]] {fa.capture_load} : memref<?x?xi32>
    // CHECK-COUNT-7: memref.load %{{.*}} {fa.capture_load} : memref<?x?xi32>
    // CHECK: } {fa.hoist_capture_loads}
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) captures(%doc : memref<?x?xi32>) : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
      %a = memref.load %d[%bb, %qi] : memref<?x?xi32>
      %c = memref.load %d[%bb, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %a, %c : i32
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %al = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// The same mask with a block mask's word that the tile is kept whole: whole
// tiles skip the branch, so the loads stay in it (hoisted, they would load
// ids for every tile and hold them through the products).
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @document_block_mask
func.func @document_block_mask(%n: index, %q0: index, %k0: index, %doc: memref<?x?xi32>, %whole: i1) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: scf.if
    // CHECK-COUNT-8: memref.load %{{.*}} {fa.capture_load} : memref<?x?xi32>
    // CHECK: } else {
    // CHECK-NEXT: scf.yield
    // CHECK-NEXT: {{^ *}$}}
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) captures(%doc : memref<?x?xi32>) kept_whole %whole : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
      %a = memref.load %d[%bb, %qi] : memref<?x?xi32>
      %c = memref.load %d[%bb, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %a, %c : i32
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %al = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// fa.unchecked_key_loads: the same block-mask tile tests its scores in two
// versions. Where the thread's last key (its first column plus the
// layout's last column offset, 4) is below the ids' key count, the loads
// indexed by the key itself go unclamped; the row's loads (and every load
// of the other version, the tail tile's) keep their clamps.
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @document_unchecked_keys
func.func @document_unchecked_keys(%n: index, %q0: index, %k0: index, %doc: memref<?x?xi32>, %whole: i1) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<1.0> : tensor<16x8xf32, #blocked>
    // CHECK: %[[KEYS:.*]] = memref.dim %[[DOC:.*]], %c1{{.*}} : memref<?x?xi32>
    // CHECK-NEXT: %[[INSIDE:.*]] = arith.cmpi ult, %{{.*}}, %[[KEYS]] : index
    // CHECK-NEXT: scf.if %[[INSIDE]] -> (f32, f32, f32, f32) {
    // CHECK: %[[ROW:[0-9]+]] = arith.minui %[[Q:[0-9]+]], %{{[0-9]+}} : index
    // CHECK-NEXT: memref.load %[[DOC]][%{{[0-9]+}}, %[[ROW]]] {fa.capture_load}
    // CHECK: memref.load %[[DOC]][%{{[0-9]+}}, %[[KEY:[0-9]+]]] {fa.capture_load}
    // CHECK-NEXT: arith.cmpi eq
    // CHECK-NOT: arith.minui %[[KEY]],
    // CHECK: } else {
    // CHECK: arith.minui %[[Q]],
    // CHECK: %[[CLAMPED:[0-9]+]] = arith.minui %[[KEY]], %{{[0-9]+}} : index
    // CHECK-NEXT: memref.load %[[DOC]][%{{[0-9]+}}, %[[CLAMPED]]] {fa.capture_load}
    %r = fa.mask %s, %q0, %k0, %n, %n at(%b, %h) captures(%doc : memref<?x?xi32>) kept_whole %whole {fa.unchecked_key_loads} : tensor<16x8xf32, #blocked> mask_mod {
    ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
      %a = memref.load %d[%bb, %qi] : memref<?x?xi32>
      %c = memref.load %d[%bb, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %a, %c : i32
      fa.yield %keep : i1
    }
    %row = arith.constant dense<0.0> : tensor<16xf32, #blocked>
    %mn, %p, %l, %al = fa.online_softmax %r, %row, %row {scale = 1.0 : f32} : tensor<16x8xf32, #blocked>, tensor<16xf32, #blocked>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// Sinks, lowered once against the layout. #fa.blocked<threads = [8, 4]> on
// 16 rows: each thread holds rows t / 4 and t / 4 + 8, one copy per lane
// of the 4 that share them (the copy is the thread's column, t % 4).
#blocked = #fa.blocked<threads = [8, 4]>
// CHECK-LABEL: gpu.func @sinks
func.func @sinks(%sinks: memref<?xf32>, %dsinks: memref<?xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %sink = memref.load %sinks[%h] : memref<?xf32>
    %m = arith.constant dense<1.0> : tensor<16xf32, #blocked>
    %l = arith.constant dense<2.0> : tensor<16xf32, #blocked>
    // Per row slot: m_new = max(m, sink); alpha and the sink's term are
    // exp2 of log2(e)-scaled differences (a -inf base read as 0).
    // CHECK: arith.maximumf %{{.*}}, %[[SINK:.*]] : f32
    // CHECK: math.exp2
    // CHECK: math.exp2
    // CHECK: math.fma
    // CHECK: arith.maximumf %{{.*}}, %[[SINK]] : f32
    %m2, %l2, %alpha = fa.join_sink %sink, %m, %l : tensor<16xf32, #blocked>
    // -exp(sink - lse) D per row slot, 0 where D = 0 or lse = -inf.
    // CHECK: math.exp2
    // CHECK: arith.negf
    // CHECK: arith.select
    %share = fa.sink_grad %sink, %m2, %l2 : tensor<16xf32, #blocked>
    // The thread's rows summed where it holds the first copy (column 0),
    // the warp's 32 lanes summed (xor 16 .. 1), lane 0 adds atomically.
    // CHECK: %[[MINE:.*]] = arith.addf
    // CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0
    // CHECK: %[[OWN:.*]] = arith.select %[[FIRST]], %[[MINE]], %{{.*}}
    // CHECK: gpu.shuffle xor %[[OWN]], %c16_i32
    // CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
    // CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
    // CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
    // CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
    // CHECK: %[[WARP:.*]] = arith.addf
    // CHECK: scf.if
    // CHECK-NEXT: memref.atomic_rmw addf %[[WARP]], %{{.*}}[%{{.*}}]
    fa.accumulate_total %share, %dsinks[%h] : tensor<16xf32, #blocked> -> memref<?xf32>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// fa.tile_total, the deterministic sum: the warp's sum as for
// fa.accumulate_total (its lanes' first copies, xor 16 .. 1), then lane 0
// of each warp stores it in the module's static shared array (one f32 per
// warp), a barrier, every thread adds the 2 warps' sums (64 threads) in
// warp order, and a barrier before the array may be written again.
#blocked = #fa.blocked<threads = [16, 4]>
// CHECK: memref.global "private" @fa_warp_sums : memref<32xf32, #gpu.address_space<workgroup>> = uninitialized {alignment = 16 : i64}
// CHECK-LABEL: gpu.func @tile_total
func.func @tile_total(%shares: memref<?x?x?xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %share = arith.constant dense<1.0> : tensor<32xf32, #blocked>
    // CHECK: %[[OWN:.*]] = arith.select
    // CHECK: gpu.shuffle xor %[[OWN]], %c16_i32
    // CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
    // CHECK: %[[WARP:.*]] = arith.addf
    // CHECK: %[[SUMS:.*]] = memref.get_global @fa_warp_sums
    // CHECK: %[[TID:.*]] = gpu.thread_id x
    // CHECK: %[[W:.*]] = arith.divui %[[TID]], %c32
    // CHECK: scf.if
    // CHECK-NEXT: memref.store %[[WARP]], %[[SUMS]][%[[W]]]
    // CHECK: gpu.barrier
    // CHECK: %[[W0:.*]] = memref.load %[[SUMS]][%c0{{[_0-9]*}}]
    // CHECK: %[[W1:.*]] = memref.load %[[SUMS]][%c1{{[_0-9]*}}]
    // CHECK: %[[TOTAL:.*]] = arith.addf %[[W0]], %[[W1]]
    // CHECK-NOT: memref.load %[[SUMS]]
    // CHECK: gpu.barrier
    // CHECK: memref.store %[[TOTAL]], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}]
    %total = fa.tile_total %share : tensor<32xf32, #blocked>
    memref.store %total, %shares[%b, %h, %t] : memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 64, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

// A transposed #fa.mma tile (the wgmma backward's S read from S^T's
// accumulator): fa.transpose is the same registers, and the causal mask
// goes by column. Twin 32 x 16 over 2 warps: lane (g, t) of warp w holds
// keys 16 w + g and + 8 (2 columns) of queries 2t, 2t + 1, 2t + 8,
// 2t + 9 (4 rows); each key's first visible query is computed once, and
// each element compares its row offset (0, 1, 8, 9) with its key's.
#twin = #fa.mma<warps = 2>
#scores = #fa.mma<warps = 2, transposed = true>
// CHECK-LABEL: gpu.func @transposed_causal
func.func @transposed_causal(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %st = arith.constant dense<1.0> : tensor<32x16xf32, #twin>
    // CHECK-NOT: fa.transpose
    %s = fa.transpose %st : tensor<32x16xf32, #twin> -> tensor<16x32xf32, #scores>
    // CHECK: scf.if
    // Key columns 0 and 8 of the thread: first visible row, in 32 bits.
    // CHECK: arith.index_cast %{{.*}} : index to i32
    // CHECK: arith.index_cast %{{.*}} : index to i32
    // CHECK-NOT: arith.index_cast
    // 8 elements, one compare each.
    // CHECK-COUNT-8: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
    // CHECK-NOT: arith.cmpi slt
    // CHECK: scf.yield
    %m = fa.mask %s, %n, %n, %n, %n {mask = #fa.mask<causal>} : tensor<16x32xf32, #scores>
    %back = fa.transpose %m : tensor<16x32xf32, #scores> -> tensor<32x16xf32, #twin>
    %sink = fa.convert_layout %back {fa.shared_offset = 0 : i64} : tensor<32x16xf32, #twin> -> tensor<32x16xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 64, shared_bytes = 2048, stages = 1, registers = 32>}
  return
}
