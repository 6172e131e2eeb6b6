;; envfoo.wat - imports env.foo, which plimsoll must refuse.
(module
  (import "env" "foo" (func $foo (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $foo (i32.const 1)))))
