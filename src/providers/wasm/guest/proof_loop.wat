;; SPDX-License-Identifier: Apache-2.0
;; The wasm startup proof (proof.c): a module that loops for ever, stopped
;; at a 100 ms deadline.
(module
  (memory (export "memory") 1)
  (func (export "_start") (loop (br 0))))
