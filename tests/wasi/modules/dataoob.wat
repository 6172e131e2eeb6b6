;; dataoob.wat - an active data segment that does not fit in memory: valid
;; to parse, fails at instantiation (PL_WASI_ERR_INSTANTIATE).
(module
  (memory (export "memory") 1)
  (data (i32.const 65530) "0123456789")
  (func (export "_start")))
