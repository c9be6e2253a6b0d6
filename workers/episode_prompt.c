/* episode_prompt.c: what the policy is told before its first turn (the skill guide of
 * workers/prompts/ as the system message, the task as the user message) and the tools it is
 * offered (the agent's six and the judge's four). */
#include "episode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define GUIDE_MAX (256 << 10)

/* The skill guide: KFORGE_HARNESS_DIR/../prompts/skill_guide.md. Owned text or NULL. */
static char *read_guide(const char *harness_dir, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/../prompts/skill_guide.md", harness_dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "the skill guide %s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(GUIDE_MAX + 1);
    size_t n = text ? fread(text, 1, GUIDE_MAX, f) : 0;
    fclose(f);
    if (text == NULL || n == 0) {
        free(text);
        snprintf(err, errlen, "the skill guide %s is empty or unreadable", path);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

json_t *kfw_prompt_messages(const struct kfw_episode *ep, char *err, size_t errlen) {
    char *guide = read_guide(ep->w->cfg.harness_dir, err, errlen);
    if (guide == NULL)
        return NULL;
    struct kf_buf u = {0};
    kf_buf_printf(&u,
                  "Task `%s`, backend **%s**. The reference, also in your workspace as "
                  "`model.py` (read-only):\n\n```python\n",
                  ep->task_name, ep->job->backend);
    kf_buf_append(&u, ep->source, strlen(ep->source));
    kf_buf_printf(&u,
                  "\n```\n\nWrite `model_new.py` and `kernels/` so that `ModelNew` computes the "
                  "same outputs faster than PyTorch. Work through the tools; call `submit` when "
                  "your best verified candidate is in the workspace.\n\nLimits of this episode: "
                  "%ld turns, %ld context tokens, %ld s of wall time, %ld s of judge time; tool "
                  "outputs longer than %ld bytes are cut.\n",
                  ep->lim.max_turns, ep->lim.max_context_tokens, ep->lim.max_wall_s,
                  ep->lim.max_gpu_s, ep->lim.max_tool_output_bytes);
    kf_buf_append(&u, "", 0);
    json_t *m = NULL;
    if (u.data != NULL)
        m = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", guide, "role",
                      "user", "content", u.data);
    if (m == NULL)
        snprintf(err, errlen, "out of memory building the prompt");
    kf_buf_free(&u);
    free(guide);
    return m;
}

static json_t *judge_def(const char *name, const char *desc) {
    return json_pack("{s:s, s:{s:s, s:s, s:{s:s, s:{}, s:b}}}", "type", "function", "function",
                     "name", name, "description", desc, "parameters", "type", "object",
                     "properties", "additionalProperties", 0);
}

json_t *kfw_prompt_tools(void) {
    json_t *tools = kf_tool_definitions();
    if (tools == NULL)
        return NULL;
    json_array_append_new(tools,
                          judge_def("compile", "Build kernels/ into one shared library: ok, or the "
                                               "compiler's diagnostics and static flags."));
    json_array_append_new(
        tools, judge_def("verify", "Build if needed, then run the correctness trials on fresh "
                                   "secret inputs: status, each trial's result and errors, "
                                   "flags."));
    json_array_append_new(
        tools,
        judge_def("profile", "Verify, then time the candidate against PyTorch eager and "
                             "torch.compile: times, speedups, the reward it earns now. Before "
                             "model_new.py exists: the reference's times and operator graph."));
    json_array_append_new(
        tools, judge_def("submit", "Final evaluation of the current candidate; ends the "
                                   "episode. The best verified candidate is re-validated with "
                                   "a new secret seed."));
    return tools;
}
