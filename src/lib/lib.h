/*
 * lib.h: what libplimsoll's files share; not installed.
 */
#pragma once
#include "../../include/plimsoll.h"

/* Fill err (kind, printf message; everything else cleared); returns -1. */
int plc_fail(struct plimsoll_error *err, enum plimsoll_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
