// SPDX-License-Identifier: Apache-2.0
//go:build !unix

package plimsoll

const noFollow = 0
