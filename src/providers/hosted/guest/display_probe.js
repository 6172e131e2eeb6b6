// SPDX-License-Identifier: Apache-2.0
// The startup session's JavaScript display probe (hosted/cells.c), run as
// a cell: one display output that must come back.
display('js');
