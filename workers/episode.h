/* episode.h: an optimize job's agent episode (workers/episode_*.c). One task, one policy, one
 * workspace; the loop asks the policy for a turn, runs the tools it called (the agent's own in
 * workers/agent/tools.h, the judge's in episode_judge.c), stores the turn, and ends on submit,
 * a limit, the policy stopping or failing, a cancel, a lost fence or a stop. The best candidate
 * is then re-validated with a fresh secret seed (its verdict is the episode's result).
 *
 * A reclaimed episode restarts cleanly: the new attempt deletes the old turns and starts from
 * an empty workspace (the old one lived on the dead worker's disk). */
#ifndef KF_EPISODE_H
#define KF_EPISODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "expert.h"
#include "openai.h"
#include "tools.h"
#include "worker.h"

/* The limits of an episode (the job's payload.limits, defaults filled by the server). */
struct kfw_limits {
    long max_turns, max_context_tokens, max_wall_s, max_gpu_s, max_tool_output_bytes;
};

/* The best candidate so far: correct by verify, profile or submit; faster wins (a timed one
 * beats an untimed one). */
struct kfw_best {
    char candidate_id[37]; /* "" when none */
    json_t *files;         /* owned: name -> content */
    double speedup;        /* vs eager; 0 when not timed */
};

/* One episode's state (episode_run.c owns it; the other files borrow it). */
struct kfw_episode {
    struct kfw *w;
    const struct kfw_job *job;
    struct kf_log_ctx lc;
    char id[37];
    char task_id[37];
    char att[24];
    char policy[16];       /* openai or expert */
    json_t *policy_config; /* owned */
    json_t *options;       /* owned: budget_s, no_compile */
    struct kfw_limits lim;
    char *source; /* owned: the task's source */
    char task_name[256];
    char ws[4096];        /* the agent's workspace: model.py (read-only), model_new.py, kernels/ */
    char judge_dir[4096]; /* the judge's copy: task.py and candidate/ (rewritten per call) */
    json_t *messages;     /* owned: the conversation, OpenAI format */
    json_t *tools;        /* owned: the tool definitions offered */
    struct kf_openai_cfg ocfg;
    const char *const *readonly;
    int64_t t0_ms; /* the episode's start */
    double gpu_s;  /* the judge's time so far (minus waits for the GPU lock) */
    long prompt_tokens, completion_tokens, context_tokens;
    int n_turns;
    struct kfw_best best;
    json_t *env;               /* owned: the judge's env of the last verdict */
    json_t *last_verdict;      /* owned: the last judge verdict (the expert reads it) */
    struct kfw_expert *expert; /* owned: the expert policy's state (policy expert) */
    char reward_version[32];   /* of the last verdict ("" before any) */
    char end_reason[48];
    char end_detail[512];
    bool submitted;
    enum kfw_outcome stop; /* KFW_RESULT unless cancelled, lost or handed back */
    char stop_reason[512];
};

/* True when the episode must stop now (cancel, lost fence, stop signal): sets ep->stop. */
bool kfw_episode_interrupted(struct kfw_episode *ep);

/* episode_judge.c: true when name is compile, verify, profile or submit. */
bool kfw_judge_tool(const char *name);

/* Runs judge tool name for the policy: snapshots the workspace's candidate files, runs the
 * harness, and returns the feedback text (owned, malloc) for the policy. *component gets the
 * reward components (a new object, owned by the caller) for verify, profile and submit, NULL
 * for compile and for a failure before the harness ran. Updates ep->best, ep->gpu_s, ep->env.
 * ep->stop is set when the harness was interrupted (cancel, lost fence, stop). */
char *kfw_judge_run(struct kfw_episode *ep, const char *name, const char *call_id,
                    json_t **component);

/* Re-validates ep->best with a fresh seed; returns the verdict (owned) or NULL (reason in
 * ep->end_detail). */
json_t *kfw_judge_revalidate(struct kfw_episode *ep);

/* episode_prompt.c: the system and user messages of the episode (a new array), and the tool
 * definitions (a new array: the agent's tools and the judge's). NULL with err on failure. */
json_t *kfw_prompt_messages(const struct kfw_episode *ep, char *err, size_t errlen);
json_t *kfw_prompt_tools(void);

/* The feedback text of a verdict for the policy (owned, malloc), cut to max bytes. */
char *kfw_verdict_text(const json_t *verdict, const char *tool, size_t max);

#endif
