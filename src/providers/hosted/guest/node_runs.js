// SPDX-License-Identifier: Apache-2.0
// Step 2 of the startup test's project (`node -e <this>`): Node runs, with
// its own modules.  Prints "function".
console.log(typeof require('fs').readFileSync)
