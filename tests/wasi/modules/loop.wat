;; loop.wat - spins forever; only a process kill stops it.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $l (br $l))))
