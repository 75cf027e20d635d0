func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index, %kv_len: index) -> i1 {
  %keep = arith.cmpi sle, %kv, %q : index
  return %keep : i1
}
