;; unknown.wat - imports a preview 1 function the runner does not implement
;; (fd_pwrite); it is bound to an ENOSYS stub, and the module exits with
;; the errno it got back (52).
(module
  (import "wasi_snapshot_preview1" "fd_pwrite"
    (func $fd_pwrite (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (call $proc_exit
      (call $fd_pwrite (i32.const 1) (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 0)))))
