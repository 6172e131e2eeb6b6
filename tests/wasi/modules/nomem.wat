;; nomem.wat - exports no memory; refused.
(module
  (func (export "_start")))
