// SPDX-License-Identifier: Apache-2.0
//go:build unix

package plimsoll

import "syscall"

// noFollow makes Artifact.Save's last open refuse a symlink put there
// after its check.
const noFollow = syscall.O_NOFOLLOW
