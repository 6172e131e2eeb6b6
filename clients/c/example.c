#include <plimsoll.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    struct plimsoll_error err;
    plimsoll_client *c =
        plimsoll_client_new(&(struct plimsoll_options){.url = getenv("PLIMSOLL_URL"),
                                                       .api_key = getenv("PLIMSOLL_KEY")},
                            &err);
    json_t *r = NULL;
    struct plimsoll_run_options ro = {.minimum_isolation = "process"};
    if (!c || plimsoll_run_snippet(c, "javascript", "console.log(6 * 7)", &ro, &r, &err) < 0)
        return fprintf(stderr, "%s: %s\n", plimsoll_errkind_name(err.kind), err.message), 1;
    printf("%s", json_string_value(json_object_get(r, "stdout"))); /* 42, record checked */
    json_decref(r);
    plimsoll_client_free(c);
}
