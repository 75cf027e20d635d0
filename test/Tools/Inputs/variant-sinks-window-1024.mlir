func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index, %kv_len: index) -> i1 {
  %c4 = arith.constant 4 : index
  %sink = arith.cmpi slt, %kv, %c4 : index
  %c = arith.constant 1024 : index
  %lo = arith.subi %q, %c : index
  %window = arith.cmpi sge, %kv, %lo : index
  %keep = arith.ori %sink, %window : i1
  return %keep : i1
}
