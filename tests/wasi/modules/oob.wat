;; oob.wat - an i32.store whose effective address (0xfffffffe + 4) is far
;; outside the single 64 KiB page of memory.  Must trap, not touch the host.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (i32.store offset=4 (i32.const 0xfffffffe) (i32.const 0x41414141))))
