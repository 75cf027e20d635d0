func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index,
                    %kv_len: index, %doc: memref<8xi32>) -> i1 {
  %x = memref.load %doc[%b] : memref<8xi32>
  %zero = arith.constant 0 : i32
  %keep = arith.cmpi eq, %x, %zero : i32
  return %keep : i1
}
