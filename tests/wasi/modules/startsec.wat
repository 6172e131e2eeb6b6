;; startsec.wat - has a start section that writes a line and traps; the
;; runner runs it like _start, so this is a trap result, not an
;; instantiation failure.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "in start\n")
  (func $init
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 9))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    unreachable)
  (start $init)
  (func (export "_start")))
