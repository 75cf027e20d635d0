func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index,
                    %kv_len: index, %lengths: memref<?xi64>) -> i1 {
  %zero = arith.constant 0 : index
  %batches = memref.dim %lengths, %zero : memref<?xi64>
  %last = arith.constant 1 : index
  %lastBatch = arith.subi %batches, %last : index
  %row = arith.minui %b, %lastBatch : index
  %length = memref.load %lengths[%row] : memref<?xi64>
  %n = arith.index_cast %length : i64 to index
  %keep = arith.cmpi slt, %kv, %n : index
  return %keep : i1
}
