/* expert_probe: the expert's code generation alone, for tests/agent/test_expert_codegen.py.
 *   expert_probe cuda|cpu GRAPH.json   prints {"ok", "detail", "n_inputs", "model", "kernels":
 * [...]} GRAPH.json is the output of `kforge_harness inspect`. Exit 0 when it printed, 2 on bad
 * usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expert.h"

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "cpu") != 0)) {
        fprintf(stderr, "usage: expert_probe cuda|cpu GRAPH.json\n");
        return 2;
    }
    json_error_t jerr;
    json_t *g = json_load_file(argv[2], 0, &jerr);
    if (g == NULL) {
        fprintf(stderr, "expert_probe: %s: %s\n", argv[2], jerr.text);
        return 2;
    }
    char *body = NULL, detail[512] = "";
    int n = 0, bcast = 0;
    int rc = kfw_ew_plan(g, &body, &n, &bcast, detail, sizeof(detail));
    json_t *out = json_pack("{s:b, s:s, s:i, s:b, s:[]}", "ok", rc == 0, "detail", detail,
                            "n_inputs", n, "bcast", bcast, "kernels");
    if (rc == 0) {
        char *model = bcast ? kfw_bcast_model(n) : kfw_ew_model(n);
        json_object_set_new(out, "model", json_string(model ? model : ""));
        free(model);
        char *src;
        for (int v = 0; (src = bcast ? kfw_bcast_kernel(argv[1], body, n, v)
                                     : kfw_ew_kernel(argv[1], body, n, v)) != NULL;
             v++) {
            json_array_append_new(json_object_get(out, "kernels"), json_string(src));
            free(src);
        }
    }
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
    free(body);
    json_decref(out);
    json_decref(g);
    return 0;
}
