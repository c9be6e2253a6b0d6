/* expert_ops_probe: the expert's generators for library-backed operators (expert_ops.h) on one
 * node, for tests/agent/test_expert_ops.py.
 *   expert_ops_probe cuda|cpu GRAPH.json NODE_NAME IN0 [IN1 ...]
 * prints {"ok", "detail", "py": the Python lines, "kernels": [the variants' sources]} for the
 * node named NODE_NAME of GRAPH.json (the output of `kforge_harness inspect`), generated with
 * fn "kf_op0", out "t0" and the operands' Python expressions IN0... The generator is picked
 * from the node's module_type or target (as the planner would). Exit 0 when it printed, 2 on
 * bad usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_ops.h"

struct gen {
    kfx_py_fn py;
    kfx_src_fn src;
};

/* The generator of node by its module_type or target's last name; {NULL, NULL} when none. */
static struct gen generator_of(const json_t *node) {
    const char *s = json_string_value(json_object_get(node, "module_type"));
    if (!s) {
        const char *target = json_string_value(json_object_get(node, "target"));
        const char *dot = target ? strrchr(target, '.') : NULL;
        s = dot ? dot + 1 : target ? target : "";
    }
    static const char *const gemm[] = {"Linear", "linear", "matmul", "mm", "bmm"};
    for (size_t i = 0; i < sizeof(gemm) / sizeof(gemm[0]); i++)
        if (!strcmp(s, gemm[i]))
            return (struct gen){kfx_gemm_py, kfx_gemm_src};
    if (strstr(s, "Conv") == s || strstr(s, "conv") == s)
        return (struct gen){kfx_conv_py, kfx_conv_src};
    if (strstr(s, "Pool2d") || strstr(s, "pool2d") || strstr(s, "Pool1d") || strstr(s, "pool1d") ||
        strstr(s, "Pool3d") || strstr(s, "pool3d"))
        return (struct gen){kfx_pool_py, kfx_pool_src};
    return (struct gen){NULL, NULL};
}

static const json_t *node_named(const json_t *g, const char *name) {
    size_t i;
    const json_t *node;
    json_array_foreach(json_object_get(json_object_get(g, "graph"), "nodes"), i, node) {
        const char *n = json_string_value(json_object_get(node, "name"));
        if (n && !strcmp(n, name))
            return node;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 8 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "cpu") != 0)) {
        fprintf(stderr, "usage: expert_ops_probe cuda|cpu GRAPH.json NODE_NAME IN0 [IN1 ...]\n");
        return 2;
    }
    json_error_t jerr;
    json_t *g = json_load_file(argv[2], 0, &jerr);
    if (g == NULL) {
        fprintf(stderr, "expert_ops_probe: %s: %s\n", argv[2], jerr.text);
        return 2;
    }
    struct kfx_call c = {.node = node_named(g, argv[3]),
                         .fn = "kf_op0",
                         .n_in = argc - 4,
                         .out = "t0",
                         .backend = argv[1]};
    for (int i = 0; i < c.n_in; i++)
        c.in[i] = argv[4 + i];
    char detail[512] = "";
    struct kf_buf py = {0};
    struct gen gen = c.node ? generator_of(c.node) : (struct gen){NULL, NULL};
    int rc = -1;
    if (c.node == NULL)
        snprintf(detail, sizeof(detail), "no node named %s", argv[3]);
    else if (gen.py == NULL)
        snprintf(detail, sizeof(detail), "no generator for node %s", argv[3]);
    else
        rc = gen.py(&c, &py, detail, sizeof(detail));
    json_t *out = json_pack("{s:b, s:s, s:s, s:[]}", "ok", rc == 0, "detail", detail, "py",
                            rc == 0 && py.data ? py.data : "", "kernels");
    char *src;
    for (int v = 0; rc == 0 && (src = gen.src(&c, v)) != NULL; v++) {
        json_array_append_new(json_object_get(out, "kernels"), json_string(src));
        free(src);
    }
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
    kf_buf_free(&py);
    json_decref(out);
    json_decref(g);
    return 0;
}
