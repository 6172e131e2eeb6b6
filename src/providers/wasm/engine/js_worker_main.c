/*
 * plimsoll-js-worker: the executable the JS pool spawns for each worker
 * slot.  All logic lives in js_worker.c; this file only provides main().
 */
#include "js_worker.h"

int main(int argc, char **argv) {
    return pl_js_worker_main(argc, argv);
}
