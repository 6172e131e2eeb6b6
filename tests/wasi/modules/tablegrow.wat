;; tablegrow.wat - table.grow by 10^6 elements must fail (-1) because the
;; runner lowers every table's maximum to PL_WASI_MAX_TABLE_ELEMS; exits 0
;; when it failed, 1 when the host allocated the growth.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "_start")
    (call $proc_exit
      (i32.ne (table.grow $t (ref.null func) (i32.const 1000000)) (i32.const -1)))))
