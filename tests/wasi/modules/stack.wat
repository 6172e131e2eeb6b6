;; stack.wat - unbounded recursion; must trap with "call stack exhausted".
(module
  (memory (export "memory") 1)
  (func $f (param i64) (result i64)
    (i64.add (call $f (i64.add (local.get 0) (i64.const 1))) (i64.const 1)))
  (func (export "_start")
    (drop (call $f (i64.const 0)))))
