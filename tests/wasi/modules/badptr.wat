;; badptr.wat - calls WASI functions with guest pointers outside linear
;; memory and exits with the errno it got back.  The case is chosen by the
;; number of arguments: argc - 1.
;;   0 fd_write, iovec array at 0xfffffff8            -> 21 EFAULT
;;   1 fd_write, iovec buffer straddles memory's end   -> 21 EFAULT
;;   2 fd_write, nwritten pointer just past the end    -> 21 EFAULT
;;   3 fd_write, 100000 iovecs (over the cap)          -> 28 EINVAL
;;   4 args_get, argv array at 0xfffffffc              -> 21 EFAULT
;;   5 random_get, buffer straddles memory's end       -> 21 EFAULT
;;   6 clock_time_get, result pointer straddles end    -> 21 EFAULT
;;   7 fd_read, iovec buffer straddles memory's end    -> 21 EFAULT
;;   8 fd_write to fd 5                                -> 8  EBADF
;;   9 fd_write, everything valid ("x\n" on stdout)    -> 0
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get"
    (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get"
    (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x\n")
  (func (export "_start") (local $case i32) (local $r i32)
    (drop (call $args_sizes_get (i32.const 0) (i32.const 4)))
    (local.set $case (i32.sub (i32.load (i32.const 0)) (i32.const 1)))
    (local.set $r (i32.const 999))
    ;; valid iovec at 32: {16, 2}
    (i32.store (i32.const 32) (i32.const 16))
    (i32.store (i32.const 36) (i32.const 2))
    ;; iovec at 40 whose 8-byte buffer starts 4 bytes before the end
    (i32.store (i32.const 40) (i32.const 65532))
    (i32.store (i32.const 44) (i32.const 8))
    (if (i32.eq (local.get $case) (i32.const 0)) (then (local.set $r
      (call $fd_write (i32.const 1) (i32.const 0xfffffff8) (i32.const 1) (i32.const 8)))))
    (if (i32.eq (local.get $case) (i32.const 1)) (then (local.set $r
      (call $fd_write (i32.const 1) (i32.const 40) (i32.const 1) (i32.const 8)))))
    (if (i32.eq (local.get $case) (i32.const 2)) (then (local.set $r
      (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 65536)))))
    (if (i32.eq (local.get $case) (i32.const 3)) (then (local.set $r
      (call $fd_write (i32.const 1) (i32.const 32) (i32.const 100000) (i32.const 8)))))
    (if (i32.eq (local.get $case) (i32.const 4)) (then (local.set $r
      (call $args_get (i32.const 0xfffffffc) (i32.const 64)))))
    (if (i32.eq (local.get $case) (i32.const 5)) (then (local.set $r
      (call $random_get (i32.const 65000) (i32.const 1000)))))
    (if (i32.eq (local.get $case) (i32.const 6)) (then (local.set $r
      (call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 65532)))))
    (if (i32.eq (local.get $case) (i32.const 7)) (then (local.set $r
      (call $fd_read (i32.const 0) (i32.const 40) (i32.const 1) (i32.const 8)))))
    (if (i32.eq (local.get $case) (i32.const 8)) (then (local.set $r
      (call $fd_write (i32.const 5) (i32.const 32) (i32.const 1) (i32.const 8)))))
    (if (i32.eq (local.get $case) (i32.const 9)) (then (local.set $r
      (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 8)))))
    (call $proc_exit (local.get $r))))
