// SPDX-License-Identifier: Apache-2.0
// The wasm startup proof (proof.c), 4: the pool still answers after a
// guest was abandoned at its deadline.
console.log('again');
