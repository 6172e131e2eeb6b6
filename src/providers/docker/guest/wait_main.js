// SPDX-License-Identifier: Apache-2.0
// The JavaScript waiter (bootstrap.py holds it as WAIT_JS, put in by
// scripts/build/embed, and writes it to /tmp/.plimsoll-wait.js): `node
// FILE` does what wait_main.py does for /tmp/.plimsoll-main.js, through
// node's own entry point (require.main, argv, exit codes and uncaught
// errors are node's; the bottom frame of a stack names this file instead
// of node's internal one).
'use strict';
const fs = require('fs');
const go = Buffer.alloc(8);
let n = 0;
try { n = fs.readSync(3, go, 0, 8, null); fs.closeSync(3); } catch (e) { process.exit(70); }
try { fs.unlinkSync(__filename); } catch (e) { }
if (go.toString('latin1', 0, n) !== 'go') process.exit(70);
process.argv[1] = '/tmp/.plimsoll-main.js';
require('module').runMain();
