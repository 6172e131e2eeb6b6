#include <plimsoll.h>
#include <stdio.h>

int main(void) {
    struct plimsoll_error err;
    /* PLIMSOLL_URL, and PLIMSOLL_KEY or the key in the file PLIMSOLL_KEY_FILE */
    plimsoll_client *c = plimsoll_client_from_env(NULL, &err);
    json_t *r = NULL;
    struct plimsoll_run_options ro = {.minimum_isolation = "process"};
    if (!c || plimsoll_run_snippet(c, "javascript", "console.log(6 * 7)", &ro, &r, &err) < 0)
        return fprintf(stderr, "%s: %s\n", plimsoll_errkind_name(err.kind), err.message), 1;
    printf("%s", json_string_value(json_object_get(r, "stdout"))); /* 42, record checked */
    json_decref(r);
    plimsoll_client_free(c);
}
