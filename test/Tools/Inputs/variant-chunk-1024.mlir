func.func @mask_mod(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index, %kv_len: index) -> i1 {
  %shift = arith.subi %kv_len, %q_len : index
  %diag = arith.addi %q_idx, %shift : index
  %c = arith.constant 1024 : index
  %qc = arith.floordivsi %diag, %c : index
  %kc = arith.floordivsi %kv_idx, %c : index
  %keep = arith.cmpi eq, %qc, %kc : index
  return %keep : i1
}
