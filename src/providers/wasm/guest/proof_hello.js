// SPDX-License-Identifier: Apache-2.0
// The wasm startup proof (proof.c), 1: a hello world prints exactly 42.
console.log(6 * 7);
