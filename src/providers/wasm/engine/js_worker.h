/*
 * Entry point of the worker process that executes JavaScript guests for
 * the pool (see js_worker.c for the design, js_proto.h for the protocol).
 * Linked into the small plimsoll-js-worker executable; the daemon never
 * calls it directly.
 */
#ifndef PLIMSOLL_JS_WORKER_H
#define PLIMSOLL_JS_WORKER_H

/**
 * pl_js_worker_main - run a worker: expects the pool's socket on fd 3,
 * serves RUN requests until it closes, then exits the process.
 * Accepts "--no-seccomp" (debugging only).  Returns only on a startup
 * error, with a process exit status (2).
 */
int pl_js_worker_main(int argc, char **argv);

#endif
