;; SPDX-License-Identifier: Apache-2.0
;; The wasm startup proof (proof.c): a module asking for 300 pages (18.75
;; MiB) of initial memory, refused under a 16 MiB cap.
(module
  (memory (export "memory") 300)
  (func (export "_start")))
