// SPDX-License-Identifier: Apache-2.0
// The wasm startup proof (proof.c), 3: a regex bomb, a loop that never
// reaches QuickJS's interrupt check, must be stopped at a 100 ms deadline.
/(a+)+$/.test('a'.repeat(40) + 'b');
console.log('escaped');
