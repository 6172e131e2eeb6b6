// SPDX-License-Identifier: Apache-2.0
// The wasm startup proof (proof.c), 2: run under a 16 MiB cap, a 64 MiB
// allocation must end the run out of memory, printing nothing.
const b = new ArrayBuffer(64 * 1024 * 1024);
console.log(b.byteLength);
