func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, %q_len: index, %kv_len: index, %doc: memref<?x?xi32>) -> i1 {
  %shift = arith.subi %kv_len, %q_len : index
  %diag = arith.addi %q, %shift : index
  %zero = arith.constant 0 : index
  %inside = arith.cmpi sge, %diag, %zero : index
  %row = arith.maxsi %diag, %zero : index
  %qdoc = memref.load %doc[%b, %row] : memref<?x?xi32>
  %kdoc = memref.load %doc[%b, %kv] : memref<?x?xi32>
  %same = arith.cmpi eq, %qdoc, %kdoc : i32
  %keep = arith.andi %inside, %same : i1
  return %keep : i1
}
