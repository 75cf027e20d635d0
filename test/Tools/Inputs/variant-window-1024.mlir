func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index, %kv_len: index) -> i1 {
  %c = arith.constant 1024 : index
  %lo = arith.subi %q, %c : index
  %keep = arith.cmpi sge, %kv, %lo : index
  return %keep : i1
}
