/* expert_probe: the expert's planning and code generation alone, for tests/agent/.
 *   expert_probe [--free-graph] cuda|cpu GRAPH.json [DIR [VARIANT]]
 * prints {"ok", "detail", "model", "steps": [{"fn", "kind", "path", "variants": [source..]}]}
 * for the graph (the output of `kforge_harness inspect`). With DIR, also writes the candidate
 * there: DIR/model_new.py and each kernel in variant VARIANT (default 0; a kernel with fewer
 * variants gets its last). With --free-graph, the graph is released once the plan is built.
 * Exit 0 when it printed, 2 on bad usage or an unwritable DIR. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "expert_plan.h"

static int save(const char *dir, const char *rel, const char *text) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text ? text : "", f);
    return fclose(f);
}

static int write_candidate(const struct kfx_plan *p, const char *dir, int variant) {
    char kdir[4096];
    snprintf(kdir, sizeof(kdir), "%s/kernels", dir);
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || (mkdir(kdir, 0755) != 0 && errno != EEXIST))
        return -1;
    char *model = kfx_plan_model(p);
    int rc = save(dir, "model_new.py", model);
    free(model);
    for (int s = 0; rc == 0 && s < p->n_steps; s++) {
        int v = variant < p->step[s].n_variants ? variant : p->step[s].n_variants - 1;
        char rel[64];
        kfx_step_path(p, s, rel, sizeof(rel));
        char *src = kfx_step_src(p, s, v);
        rc = save(dir, rel, src);
        free(src);
    }
    return rc;
}

int main(int argc, char **argv) {
    /* --free-graph: the graph is released once the plan is built, as the episode releases the
     * verdict it came in before the expert's later turns write their kernels */
    bool free_graph = argc > 1 && strcmp(argv[1], "--free-graph") == 0;
    if (free_graph) {
        argc--;
        argv++;
    }
    if (argc < 3 || argc > 5 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "cpu") != 0)) {
        fprintf(stderr, "usage: expert_probe [--free-graph] cuda|cpu GRAPH.json [DIR [VARIANT]]\n");
        return 2;
    }
    json_error_t jerr;
    json_t *g = json_load_file(argv[2], 0, &jerr);
    if (g == NULL) {
        fprintf(stderr, "expert_probe: %s: %s\n", argv[2], jerr.text);
        return 2;
    }
    struct kfx_plan *p = calloc(1, sizeof(*p));
    char detail[512] = "";
    int rc = p ? kfx_plan_build(p, g, argv[1], detail, sizeof(detail)) : -1;
    if (free_graph) {
        json_decref(g);
        g = NULL;
    }
    json_t *out = json_pack("{s:b, s:s, s:[]}", "ok", rc == 0, "detail", detail, "steps");
    int status = 0;
    if (rc == 0) {
        static const char *const kinds[] = {"ew",   "reduce", "softmax", "moments", "gemm", "conv",
                                            "pool", "scan",   "multi",   "cast",    "xent", "cat",
                                            "mask", "embed",  "gather",  "rnn"};
        _Static_assert(sizeof(kinds) / sizeof(kinds[0]) == KFX_NKINDS, "a name per step kind");
        char *model = kfx_plan_model(p);
        json_object_set_new(out, "model", json_string(model ? model : ""));
        free(model);
        for (int s = 0; s < p->n_steps; s++) {
            char rel[64];
            kfx_step_path(p, s, rel, sizeof(rel));
            json_t *vs = json_array();
            char *src;
            for (int v = 0; (src = kfx_step_src(p, s, v)) != NULL; v++) {
                json_array_append_new(vs, json_string(src));
                free(src);
            }
            json_array_append_new(json_object_get(out, "steps"),
                                  json_pack("{s:s, s:s, s:s, s:s?, s:o}", "fn", p->step[s].fn,
                                            "kind", kinds[p->step[s].kind], "path", rel, "op",
                                            p->step[s].op[0] ? p->step[s].op : NULL, "variants",
                                            vs));
        }
        if (argc >= 4 && write_candidate(p, argv[3], argc == 5 ? atoi(argv[4]) : 0) != 0) {
            fprintf(stderr, "expert_probe: cannot write %s\n", argv[3]);
            status = 2;
        }
    }
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
    if (p)
        kfx_plan_free(p);
    free(p);
    json_decref(out);
    json_decref(g);
    return status;
}
