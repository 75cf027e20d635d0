func.func @mask_mod(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index, %kv_len: index) -> i1 {
  %n = arith.constant 70 : index
  %p = arith.cmpi slt, %kv_idx, %n : index
  %shift = arith.subi %kv_len, %q_len : index
  %diag = arith.addi %q_idx, %shift : index
  %c = arith.cmpi sle, %kv_idx, %diag : index
  %keep = arith.ori %p, %c : i1
  return %keep : i1
}
