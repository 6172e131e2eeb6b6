;; bigmem.wat - initial memory of 2000 pages (125 MiB), above a 64 MiB cap.
(module
  (memory (export "memory") 2000)
  (func (export "_start")))
