;; nostart.wat - exports no _start; refused.
(module
  (memory (export "memory") 1)
  (func (export "main")))
