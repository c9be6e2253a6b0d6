/* episode_run.c: the agent loop of an optimize job (see episode.h). Per turn: ask the policy,
 * run every tool it called (in order; after submit the rest are not run), store the turn under
 * the fence with its reward components, report it as a `turn` event, and check the limits.
 * Then the best candidate is re-validated and the summary becomes the job's result.
 *
 * The loop's own time per turn (overhead_ms: everything but the policy's answer and the tools'
 * work) is measured from the end of the previous turn's tools to the start of this turn's
 * insert, so it includes the previous turn's insert and event. */
#include "episode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "workspace.h"

#define MAX_INFRA 3 /* judge failures of the infrastructure before the episode is retried */

static const char *const READONLY[] = {"model.py", NULL};

/* Milliseconds with microseconds (kf_now_ms rounds a sub-millisecond tool to 0). */
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool kfw_episode_interrupted(struct kfw_episode *ep) {
    if (ep->stop != KFW_RESULT)
        return true;
    struct kfw *w = ep->w;
    pthread_mutex_lock(&w->sh.mu);
    bool lost = w->sh.lost, cancel = w->sh.cancel;
    pthread_mutex_unlock(&w->sh.mu);
    if (lost)
        ep->stop = KFW_LOST;
    else if (cancel)
        ep->stop = KFW_CANCELLED;
    else if (w->stopping || kfw_pause(w, 0))
        ep->stop = KFW_HANDBACK;
    if (ep->stop != KFW_RESULT)
        snprintf(ep->stop_reason, sizeof(ep->stop_reason), "%s",
                 ep->stop == KFW_LOST        ? "the job was taken over or cancelled"
                 : ep->stop == KFW_CANCELLED ? "cancel requested"
                                             : "the worker stopped");
    return ep->stop != KFW_RESULT;
}

static int abort_cb(void *arg) {
    struct kfw_episode *ep = arg;
    if (kfw_episode_interrupted(ep))
        return 1;
    return kf_now_ms() - ep->t0_ms > ep->lim.max_wall_s * 1000;
}

static void end(struct kfw_episode *ep, const char *reason, const char *detail) {
    if (ep->end_reason[0])
        return;
    snprintf(ep->end_reason, sizeof(ep->end_reason), "%s", reason);
    if (detail)
        snprintf(ep->end_detail, sizeof(ep->end_detail), "%s", detail);
}

static long lim_of(const json_t *limits, const char *name, long def) {
    json_t *v = json_object_get(limits, name);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (long)json_integer_value(v) : def;
}

/* Reads the episode row, its task and the job's options. 0 or -1 (reason in err). */
static int load(struct kfw_episode *ep, char *err, size_t errlen) {
    const char *p[] = {ep->job->id};
    PGresult *r = kf_db_exec(ep->w->db, "episode_load", 1, p);
    if (r == NULL || PQntuples(r) != 1) {
        snprintf(err, errlen, "reading the episode: %s", r ? "no episode" : kf_db_error(ep->w->db));
        if (r)
            PQclear(r);
        return -1;
    }
    snprintf(ep->id, sizeof(ep->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(ep->task_id, sizeof(ep->task_id), "%s", PQgetvalue(r, 0, 1));
    snprintf(ep->policy, sizeof(ep->policy), "%s", PQgetvalue(r, 0, 2));
    ep->policy_config = json_loads(PQgetvalue(r, 0, 3), 0, NULL);
    json_t *limits = json_loads(PQgetvalue(r, 0, 4), 0, NULL);
    ep->source = strdup(PQgetvalue(r, 0, 5));
    snprintf(ep->task_name, sizeof(ep->task_name), "%s", PQgetvalue(r, 0, 6));
    json_t *payload = json_loads(PQgetvalue(r, 0, 7), 0, NULL);
    PQclear(r);
    ep->options = json_incref(json_object_get(payload, "options"));
    if (!json_is_object(ep->options)) {
        json_decref(ep->options);
        ep->options = json_object();
    }
    json_decref(payload);
    ep->lim.max_turns = lim_of(limits, "max_turns", 200);
    ep->lim.max_context_tokens = lim_of(limits, "max_context_tokens", 131072);
    ep->lim.max_wall_s = lim_of(limits, "max_wall_s", 3600);
    ep->lim.max_gpu_s = lim_of(limits, "max_gpu_s", 1800);
    ep->lim.max_tool_output_bytes = lim_of(limits, "max_tool_output_bytes", 16384);
    json_decref(limits);
    if (!json_is_object(ep->policy_config) || ep->source == NULL) {
        snprintf(err, errlen, "the episode's policy configuration is unreadable");
        return -1;
    }
    return 0;
}

/* The agent's workspace: model.py read-only and an empty kernels/. 0 or -1 (err). */
static int make_workspace(struct kfw_episode *ep, char *err, size_t errlen) {
    char dir[3072];
    snprintf(dir, sizeof(dir), "%s/work/%s", ep->w->cfg.var_dir, ep->job->id);
    kfw_ws_remove(dir);
    snprintf(ep->ws, sizeof(ep->ws), "%s/ws", dir);
    snprintf(ep->judge_dir, sizeof(ep->judge_dir), "%s/judge", dir);
    char kernels[4200], model[4200];
    snprintf(kernels, sizeof(kernels), "%s/kernels", ep->ws);
    snprintf(model, sizeof(model), "%s/model.py", ep->ws);
    if (mkdir(dir, 0755) != 0 || mkdir(ep->ws, 0755) != 0 || mkdir(kernels, 0755) != 0) {
        snprintf(err, errlen, "creating the workspace %.300s: %s", ep->ws, strerror(errno));
        return -1;
    }
    FILE *f = fopen(model, "wx");
    size_t n = strlen(ep->source);
    if (f == NULL || fwrite(ep->source, 1, n, f) != n || fclose(f) != 0 || chmod(model, 0444)) {
        snprintf(err, errlen, "writing model.py: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The policy's endpoint settings from policy_config (borrowed strings). */
static void openai_cfg(struct kfw_episode *ep) {
    json_t *pc = ep->policy_config;
    kf_openai_cfg_init(&ep->ocfg);
    ep->ocfg.base_url = json_string_value(json_object_get(pc, "base_url"));
    ep->ocfg.model = json_string_value(json_object_get(pc, "model"));
    ep->ocfg.sampling = json_object_get(pc, "sampling");
    ep->ocfg.return_token_ids = json_is_true(json_object_get(pc, "return_token_ids"));
    ep->ocfg.logprobs = (int)json_integer_value(json_object_get(pc, "logprobs"));
    ep->ocfg.timeout_s = ep->w->cfg.policy_timeout_s;
    ep->ocfg.max_retries = (int)ep->w->cfg.policy_retries;
    ep->ocfg.backoff_s = ep->w->cfg.policy_backoff_s;
    ep->ocfg.abort_cb = abort_cb;
    ep->ocfg.abort_arg = ep;
    const char *key_name = json_string_value(json_object_get(pc, "api_key_name"));
    if (key_name && key_name[0]) {
        char var[128];
        snprintf(var, sizeof(var), "KFORGE_POLICY_KEY_%s", key_name);
        ep->ocfg.api_key = getenv(var); /* the worker's configuration; never stored */
        if (ep->ocfg.api_key == NULL)
            kf_log(&ep->lc, KF_LOG_WARN, "%s is not set: calling the policy without a key", var);
    }
}

static int fenced_exec(struct kfw_episode *ep, const char *stmt, int n, const char *const *p) {
    PGresult *r = kf_db_exec(ep->w->db, stmt, n, p);
    if (r == NULL) {
        kf_log(&ep->lc, KF_LOG_WARN, "%s: %s", stmt, kf_db_error(ep->w->db));
        return -1;
    }
    int rows = atoi(PQcmdTuples(r));
    PQclear(r);
    if (rows == 0) {
        ep->stop = KFW_LOST;
        snprintf(ep->stop_reason, sizeof(ep->stop_reason), "the job was taken over or cancelled");
        return 0;
    }
    return 1;
}

/* One tool call: its result text (owned) for the policy. */
static char *run_call(struct kfw_episode *ep, const json_t *call, bool *malformed, json_t *rewards,
                      int *infra) {
    json_t *fn = json_object_get(call, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *args_text = json_string_value(json_object_get(fn, "arguments"));
    const char *id = json_string_value(json_object_get(call, "id"));
    json_error_t jerr;
    json_t *args = NULL;
    if (args_text && args_text[0])
        args = json_loads(args_text, JSON_DECODE_ANY, &jerr);
    else
        args = json_object(); /* no arguments at all: {} */
    if (args != NULL && !json_is_object(args)) {
        json_decref(args);
        args = NULL;
    }
    char *text = NULL;
    if (name && kfw_judge_tool(name)) {
        if (args == NULL || json_object_size(args) != 0) {
            *malformed = true;
            size_t n = strlen(name) + 64;
            text = malloc(n);
            if (text)
                snprintf(text, n, "%s takes no arguments: call it with {}", name);
        } else {
            json_t *comp = NULL;
            text = kfw_judge_run(ep, name, id ? id : "", &comp);
            if (comp)
                json_array_append_new(rewards, comp);
            else if (text && strncmp(text, "the judge could not finish", 26) == 0)
                (*infra)++;
        }
    } else if (name && kf_tool_known(name)) {
        struct kf_tool_ctx ctx = {.workspace = ep->ws,
                                  .jail = ep->w->cfg.jail,
                                  .readonly = ep->readonly,
                                  .max_output = (size_t)ep->lim.max_tool_output_bytes,
                                  .bash_disk_mib = ep->w->cfg.disk_mib};
        struct kf_tool_result res = {0};
        if (kf_tool_run(&ctx, name, args, &res) != 0)
            (*infra)++;
        if (res.malformed)
            *malformed = true;
        text = res.text;
        res.text = NULL;
        kf_tool_result_free(&res);
    } else {
        *malformed = true;
        size_t n = 256 + (name ? strlen(name) : 0);
        text = malloc(n);
        if (text)
            snprintf(text, n,
                     "unknown tool \"%s\": the tools are bash, read_file, write_file, edit_file, "
                     "glob, grep, compile, verify, profile, submit",
                     name ? name : "");
    }
    json_decref(args);
    if (text == NULL)
        text = strdup("(no result: out of memory)");
    return text; /* the caller frees it */
}

static char *dump(const json_t *j) {
    return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Stores turn idx and reports it. 1 stored, 0 fence lost, -1 database error. */
static int store_turn(struct kfw_episode *ep, int idx, const struct kf_openai_reply *rep,
                      json_t *results, json_t *rewards, bool malformed, double policy_ms,
                      double tools_ms, double overhead_ms) {
    char sidx[16], pt[24], ct[24], pms[32], tms[32], oms[32], ptot[24], ctot[24], gpu[32];
    snprintf(sidx, sizeof(sidx), "%d", idx);
    snprintf(pt, sizeof(pt), "%ld", rep->prompt_tokens);
    snprintf(ct, sizeof(ct), "%ld", rep->completion_tokens);
    snprintf(pms, sizeof(pms), "%.3f", policy_ms);
    snprintf(tms, sizeof(tms), "%.3f", tools_ms);
    snprintf(oms, sizeof(oms), "%.3f", overhead_ms);
    snprintf(ptot, sizeof(ptot), "%ld", ep->prompt_tokens);
    snprintf(ctot, sizeof(ctot), "%ld", ep->completion_tokens);
    snprintf(gpu, sizeof(gpu), "%.3f", ep->gpu_s);
    char *assistant = dump(rep->message), *res = dump(results), *rw = dump(rewards);
    char *pids = dump(rep->prompt_token_ids), *cids = dump(rep->token_ids),
         *lps = dump(rep->logprobs);
    const char *p[] = {ep->job->id,
                       ep->att,
                       ep->id,
                       sidx,
                       assistant,
                       res,
                       rep->finish_reason[0] ? rep->finish_reason : NULL,
                       rw,
                       malformed ? "true" : "false",
                       pids,
                       cids,
                       lps,
                       rep->prompt_tokens >= 0 ? pt : NULL,
                       rep->completion_tokens >= 0 ? ct : NULL,
                       pms,
                       tms,
                       oms,
                       ptot,
                       ctot,
                       gpu,
                       ep->best.candidate_id[0] ? ep->best.candidate_id : NULL};
    int rc = assistant && res && rw ? fenced_exec(ep, "turn_insert", 21, p) : -1;
    free(assistant);
    free(res);
    free(rw);
    free(pids);
    free(cids);
    free(lps);
    if (rc != 1)
        return rc;
    json_t *names = json_array();
    size_t i;
    json_t *call;
    json_t *calls = json_object_get(rep->message, "tool_calls");
    json_array_foreach(calls, i, call) {
        json_array_append(names, json_object_get(json_object_get(call, "function"), "name"));
    }
    json_t *data = json_pack("{s:i, s:o, s:O, s:b, s:s?}", "idx", idx, "tools", names, "rewards",
                             rewards, "malformed", malformed, "finish_reason",
                             rep->finish_reason[0] ? rep->finish_reason : NULL);
    int r = kfw_event(ep->w->db, ep->job->id, ep->job->attempt, "turn", data);
    json_decref(data);
    if (r == 0) {
        ep->stop = KFW_LOST;
        snprintf(ep->stop_reason, sizeof(ep->stop_reason), "the job was taken over or cancelled");
    }
    return r < 0 ? 1 : r; /* an event that failed for the database is not fatal */
}

/* The limits checked before each turn; true when the episode must end. */
static bool over_limits(struct kfw_episode *ep, int idx) {
    char d[128];
    if (idx >= ep->lim.max_turns) {
        snprintf(d, sizeof(d), "%ld turns", ep->lim.max_turns);
        end(ep, "max_turns", d);
    } else if (kf_now_ms() - ep->t0_ms >= ep->lim.max_wall_s * 1000) {
        snprintf(d, sizeof(d), "%ld s of wall time", ep->lim.max_wall_s);
        end(ep, "max_wall_s", d);
    } else if (ep->gpu_s >= (double)ep->lim.max_gpu_s) {
        snprintf(d, sizeof(d), "%.1f s of judge time (limit %ld s)", ep->gpu_s, ep->lim.max_gpu_s);
        end(ep, "max_gpu_s", d);
    } else if (ep->context_tokens >= ep->lim.max_context_tokens) {
        snprintf(d, sizeof(d), "%ld context tokens (limit %ld)", ep->context_tokens,
                 ep->lim.max_context_tokens);
        end(ep, "max_context_tokens", d);
    }
    return ep->end_reason[0] != '\0';
}

/* Bytes of the tool results / 4: the tokens they add to the next prompt (an estimate). */
static long result_tokens(const json_t *results) {
    size_t i, bytes = 0;
    json_t *m;
    json_array_foreach(results, i, m) {
        bytes += json_string_length(json_object_get(m, "content"));
    }
    return (long)(bytes / 4);
}

/* The expert's next turn as a policy reply; false when it stops (end_reason set). */
static bool expert_reply(struct kfw_episode *ep, struct kf_openai_reply *rep) {
    memset(rep, 0, sizeof(*rep));
    kf_openai_reply_free(rep); /* the empty reply: token counts -1 */
    double t0 = now_ms();
    char why[48], detail[512];
    rep->message =
        kfw_expert_next(ep->expert, ep->last_verdict, why, sizeof(why), detail, sizeof(detail));
    rep->seconds = (now_ms() - t0) / 1000.0;
    if (rep->message == NULL) {
        end(ep, why[0] ? why : "policy_stopped",
            detail[0] ? detail : "the expert had no more to do");
        return false;
    }
    snprintf(rep->finish_reason, sizeof(rep->finish_reason), "%s",
             json_array_size(json_object_get(rep->message, "tool_calls")) ? "tool_calls" : "stop");
    return true;
}

/* The turns of the policy, until an end or an interruption. */
static void loop(struct kfw_episode *ep) {
    int infra = 0;
    double mark = now_ms(); /* the end of the previous turn's tools */
    for (int idx = 0;; idx++) {
        if (kfw_episode_interrupted(ep) || over_limits(ep, idx))
            return;
        double pre_ms = now_ms() - mark;
        struct kf_openai_reply rep;
        char err[512] = "";
        enum kf_policy_status st = KF_POLICY_OK;
        if (ep->expert != NULL) {
            if (!expert_reply(ep, &rep))
                return; /* the expert ended the episode (end_reason set) */
        } else {
            st = kf_openai_chat(&ep->ocfg, ep->messages, ep->tools, &rep, err, sizeof(err));
        }
        if (st != KF_POLICY_OK) {
            kf_openai_reply_free(&rep);
            if (kfw_episode_interrupted(ep))
                return;
            char reason[48];
            snprintf(reason, sizeof(reason), "policy_%s",
                     st == KF_POLICY_ABORTED ? "wall_limit" : kf_policy_status_name(st));
            if (st == KF_POLICY_ABORTED)
                end(ep, "max_wall_s", "the wall-time limit passed during the policy's answer");
            else
                end(ep, reason, err);
            return;
        }
        double t_tools = now_ms();
        ep->prompt_tokens += rep.prompt_tokens > 0 ? rep.prompt_tokens : 0;
        ep->completion_tokens += rep.completion_tokens > 0 ? rep.completion_tokens : 0;
        json_array_append(ep->messages, rep.message);
        json_t *results = json_array(), *rewards = json_array();
        bool malformed = false;
        size_t i;
        json_t *call;
        json_t *calls = json_object_get(rep.message, "tool_calls");
        double tools_ms = 0;
        json_array_foreach(calls, i, call) {
            char *text;
            if (ep->submitted || ep->stop != KFW_RESULT) {
                text = strdup("not run: the episode ended before this call");
            } else {
                double t0 = now_ms();
                text = run_call(ep, call, &malformed, rewards, &infra);
                tools_ms += now_ms() - t0;
                const char *name =
                    json_string_value(json_object_get(json_object_get(call, "function"), "name"));
                if (name && !strcmp(name, "submit") && !malformed)
                    ep->submitted = true;
            }
            json_t *msg = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id",
                                    json_object_get(call, "id"), "content", text ? text : "");
            if (msg == NULL) /* content that is not UTF-8: never from our tools, but be safe */
                msg = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id",
                                json_object_get(call, "id"), "content", "(unprintable result)");
            free(text);
            json_array_append(results, msg);
            json_array_append_new(ep->messages, msg);
        }
        double post_ms = now_ms() - t_tools - tools_ms;
        long ctx = rep.prompt_tokens > 0
                       ? rep.prompt_tokens + (rep.completion_tokens > 0 ? rep.completion_tokens : 0)
                       : ep->context_tokens;
        ep->context_tokens = ctx + result_tokens(results);
        mark = now_ms(); /* this turn's insert and event count in the next turn's overhead */
        int stored = ep->stop == KFW_RESULT
                         ? store_turn(ep, idx, &rep, results, rewards, malformed,
                                      rep.seconds * 1000.0, tools_ms, pre_ms + post_ms)
                         : 0;
        if (stored == 1)
            ep->n_turns = idx + 1;
        bool no_calls = json_array_size(calls) == 0;
        char finish[32];
        snprintf(finish, sizeof(finish), "%s", rep.finish_reason);
        json_decref(results);
        json_decref(rewards);
        kf_openai_reply_free(&rep);
        if (stored < 0) {
            ep->stop = KFW_INFRA;
            snprintf(ep->stop_reason, sizeof(ep->stop_reason), "storing a turn failed");
            return;
        }
        if (ep->stop != KFW_RESULT)
            return;
        if (infra >= MAX_INFRA) {
            ep->stop = KFW_INFRA;
            snprintf(ep->stop_reason, sizeof(ep->stop_reason),
                     "the judge or the jail failed %d times", infra);
            return;
        }
        if (ep->submitted) {
            end(ep, "submitted", NULL);
            return;
        }
        if (no_calls) {
            char d[96];
            snprintf(d, sizeof(d), "a reply without tool calls (finish_reason %s)",
                     finish[0] ? finish : "none");
            end(ep, "policy_stopped", d);
            return;
        }
    }
}

/* The summary: the job's result and the episode's final columns. */
static json_t *summary(struct kfw_episode *ep, json_t *final) {
    bool ok = final && json_is_true(json_object_get(final, "correct"));
    json_t *reward = ok ? json_object_get(final, "reward") : NULL;
    json_t *s = json_pack(
        "{s:s, s:s, s:s, s:s?, s:i, s:O?, s:O?, s:O?, s:O?, s:s?, s:O?, s:O?, s:f, s:I, s:I}",
        "episode_id", ep->id, "status", "finished", "end_reason", ep->end_reason, "end_detail",
        ep->end_detail[0] ? ep->end_detail : NULL, "n_turns", ep->n_turns, "final_reward", reward,
        "reward_version", json_object_get(final, "reward_version"), "speedup_vs_eager",
        ok ? json_object_get(final, "speedup_vs_eager") : NULL, "speedup_vs_compile",
        ok ? json_object_get(final, "speedup_vs_compile") : NULL, "best_candidate_id",
        ep->best.candidate_id[0] ? ep->best.candidate_id : NULL, "final_verdict", final, "env",
        ep->env, "gpu_seconds", ep->gpu_s, "prompt_tokens", (json_int_t)ep->prompt_tokens,
        "completion_tokens", (json_int_t)ep->completion_tokens);
    if (s && !reward)
        json_object_set_new(s, "final_reward", json_integer(-1)); /* nothing correct survived */
    if (s && !json_object_get(s, "reward_version") && ep->reward_version[0])
        json_object_set_new(s, "reward_version", json_string(ep->reward_version));
    return s;
}

static void finish(struct kfw_episode *ep, struct kfw_run *run) {
    json_t *final = NULL;
    if (ep->stop == KFW_RESULT && ep->best.candidate_id[0]) {
        json_t *data = json_pack("{s:s}", "candidate_id", ep->best.candidate_id);
        int r = kfw_event(ep->w->db, ep->job->id, ep->job->attempt, "revalidating", data);
        json_decref(data);
        if (r == 0) {
            ep->stop = KFW_LOST;
            snprintf(ep->stop_reason, sizeof(ep->stop_reason), "the job was taken over");
        } else {
            final = kfw_judge_revalidate(ep);
        }
    } else if (ep->stop == KFW_RESULT && !ep->end_detail[0] && !ep->best.candidate_id[0]) {
        snprintf(ep->end_detail, sizeof(ep->end_detail), "no candidate was found correct");
    }
    if (ep->stop != KFW_RESULT) {
        run->outcome = ep->stop;
        snprintf(run->reason, sizeof(run->reason), "%s", ep->stop_reason);
    } else {
        run->outcome = KFW_RESULT;
        run->verdict = summary(ep, final);
        if (run->verdict == NULL) {
            run->outcome = KFW_INFRA;
            snprintf(run->reason, sizeof(run->reason), "out of memory building the summary");
        }
    }
    json_decref(final);
}

void kfw_episode_run(struct kfw *w, const struct kfw_job *job, struct kfw_run *run) {
    memset(run, 0, sizeof(*run));
    run->outcome = KFW_INFRA;
    struct kfw_episode ep = {
        .w = w, .job = job, .lc = w->log, .readonly = READONLY, .stop = KFW_RESULT};
    ep.lc.job_id = job->id;
    snprintf(ep.att, sizeof(ep.att), "%ld", job->attempt);
    ep.t0_ms = kf_now_ms();
    char err[512];
    if (load(&ep, err, sizeof(err)) != 0 || make_workspace(&ep, err, sizeof(err)) != 0) {
        snprintf(run->reason, sizeof(run->reason), "%s", err);
        goto out;
    }
    ep.messages = kfw_prompt_messages(&ep, err, sizeof(err));
    ep.tools = kfw_prompt_tools();
    if (ep.messages == NULL || ep.tools == NULL) {
        snprintf(run->reason, sizeof(run->reason), "%s", ep.messages ? "no tools" : err);
        goto out;
    }
    char *prompt = dump(ep.messages), *tools = dump(ep.tools);
    const char *p[] = {job->id, ep.att, ep.id, prompt, tools};
    int started = prompt && tools ? fenced_exec(&ep, "episode_start", 5, p) : -1;
    free(prompt);
    free(tools);
    if (started < 0) {
        snprintf(run->reason, sizeof(run->reason), "starting the episode: %s", kf_db_error(w->db));
        goto out;
    }
    kf_log(&ep.lc, KF_LOG_INFO, "episode %s: policy %s, %ld turns at most", ep.id, ep.policy,
           ep.lim.max_turns);
    if (started == 1) {
        if (strcmp(ep.policy, "openai") == 0) {
            openai_cfg(&ep);
            loop(&ep);
        } else if ((ep.expert = kfw_expert_new(job->backend)) != NULL) {
            loop(&ep);
        } else {
            snprintf(run->reason, sizeof(run->reason), "out of memory");
            goto out;
        }
    }
    finish(&ep, run);
    kf_log(&ep.lc, KF_LOG_INFO, "episode %s ended: %s (%d turns, judge %.1f s)%s%s", ep.id,
           ep.end_reason[0] ? ep.end_reason : "-", ep.n_turns, ep.gpu_s,
           ep.stop != KFW_RESULT ? ": " : "", ep.stop != KFW_RESULT ? ep.stop_reason : "");
out:
    if (ep.ws[0]) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/work/%s", w->cfg.var_dir, job->id);
        kfw_ws_remove(dir);
    }
    json_decref(ep.policy_config);
    json_decref(ep.options);
    json_decref(ep.messages);
    json_decref(ep.tools);
    json_decref(ep.env);
    json_decref(ep.best.files);
    json_decref(ep.last_verdict);
    kfw_expert_free(ep.expert);
    free(ep.source);
}
