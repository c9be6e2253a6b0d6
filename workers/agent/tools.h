/* tools.h: the agent's non-judge tools (bash, read_file, write_file, edit_file, glob, grep),
 * run on behalf of the policy inside one episode's workspace.
 *
 * Every path an argument names is relative to the workspace and is resolved with openat2(2)
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS from a descriptor of the workspace, so absolute paths,
 * `..` out of it and symbolic links leading out of it are refused (where openat2 is missing, a
 * component-by-component openat(O_NOFOLLOW) walk, stricter: `..` is taken off as text and every
 * symbolic link is refused).
 * bash runs `/bin/bash -c COMMAND` through kforge-jail (profile shell: no network, no GPU, only
 * the workspace writable). The files of ctx->readonly can be changed by neither: see
 * tools_bash.c for how bash is kept off them.
 *
 * Result texts are valid UTF-8 (invalid bytes and NULs become U+FFFD) and at most max_output
 * bytes: a longer one keeps its head and tail around a line "[... N bytes cut ...]".
 *
 * Files: tools.c (definitions, argument checking, dispatch, cutting), tools_fs.c (paths and the
 * five file tools), tools_bash.c (the shell). */
#ifndef KF_AGENT_TOOLS_H
#define KF_AGENT_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "buf.h"

#define KF_TOOL_DEFAULT_MAX_OUTPUT 32768u        /* max_output 0 */
#define KF_TOOL_DEFAULT_MAX_FILE (1024u * 1024u) /* max_file_bytes 0 */
#define KF_TOOL_DEFAULT_BASH_TIMEOUT_S 60.0      /* bash_timeout_s 0 */
#define KF_TOOL_DEFAULT_BASH_MEM_MIB 4096        /* bash_mem_mib 0 */
#define KF_TOOL_READ_CAP (4u * 1024u * 1024u)    /* read_file, edit_file, grep: largest file */
#define KF_TOOL_LIST_CAP 1000u                   /* glob paths, grep lines shown */
#define KF_TOOL_BASH_OUTPUT_KIB 1024u            /* bash: output captured before a kill */

struct kf_tool_ctx {
    const char *workspace;       /* absolute path of the episode's workspace */
    const char *jail;            /* path of build/kforge-jail */
    const char *const *readonly; /* NULL-terminated workspace-relative paths of files that
                                    write_file and edit_file refuse (e.g. "model.py"), and that
                                    bash cannot change; may be NULL */
    size_t max_output;           /* bytes of a result given to the policy (default 32 KiB) */
    size_t max_file_bytes;       /* largest file write_file/edit_file may produce (1 MiB) */
    double bash_timeout_s;       /* wall limit of one bash call (60) */
    int bash_mem_mib;            /* memory limit of one bash call (4096) */
    long bash_disk_mib;          /* the most the workspace may hold during a bash call (the
                                    jail's --disk; 8192 when 0) */
    const char *const *bash_ro;  /* NULL-terminated extra paths the shell may read (toolchains,
                                    e.g. /usr/local/cuda); those missing on this host are skipped;
                                    may be NULL */
};

struct kf_tool_result {
    char *text;        /* owned (free() or kf_tool_result_free): what the policy sees */
    int is_error;      /* the tool ran but failed (file not found, old matched 0 or 2+ times); a
                          bash command exiting non-zero is not an error, just reported */
    int malformed;     /* the call itself was bad: unknown tool, arguments not an object,
                          missing/extra/mistyped fields */
    size_t full_bytes; /* size of the text before cutting */
    int truncated;     /* the text was cut to max_output */
    double seconds;    /* wall time of the call */
};

/* Runs tool `name` with `args` (a JSON object, borrowed; NULL when the model's arguments did
 * not parse: then malformed=1 with a message naming the expected arguments). Always fills *out
 * (the caller frees it with kf_tool_result_free); returns 0, or -1 only on an internal failure
 * (out of memory, workspace or jail binary missing, the jail failing to set up: text says so,
 * and is_error is set). */
int kf_tool_run(const struct kf_tool_ctx *ctx, const char *name, const json_t *args,
                struct kf_tool_result *out);

/* Frees r->text; r may then be reused. */
void kf_tool_result_free(struct kf_tool_result *r);

/* Whether name is one of the six tools of this module. */
int kf_tool_known(const char *name);

/* The OpenAI-format tool definitions ({"type":"function","function":{"name","description",
 * "parameters": JSON schema}}) of the six tools, as a new array (the caller owns it); NULL when
 * memory ran out. */
json_t *kf_tool_definitions(void);

/* ---- Between the module's files (not for callers) ---- */

/* One call in progress. The tools append to text through kf_tool_say/kf_tool_put (which record
 * a lack of memory in oom rather than failing) and set is_error. */
struct kf_tool_call {
    const struct kf_tool_ctx *ctx;
    int wsfd;           /* O_PATH descriptor of the workspace (borrowed) */
    const json_t *args; /* checked: exactly the tool's fields, all strings (borrowed) */
    struct kf_buf text; /* the answer so far (owned by the call) */
    int is_error;
    int oom;
};

/* Appends formatted text / n bytes to c->text. */
void kf_tool_say(struct kf_tool_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kf_tool_put(struct kf_tool_call *c, const void *p, size_t n);
/* Sets is_error and appends formatted text. */
void kf_tool_fail(struct kf_tool_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The string argument `name` (borrowed from c->args) and its length, or NULL when absent. */
const char *kf_tool_arg(const struct kf_tool_call *c, const char *name, size_t *len);

/* Opens path beneath the workspace descriptor wsfd with open flags `flags` (O_CLOEXEC is
 * added); nosymlinks refuses every symbolic link on the way (RESOLVE_NO_SYMLINKS). Returns a
 * new descriptor (the caller closes it) or -errno: EXDEV for a path leading out of the
 * workspace, ELOOP for a refused link. Absolute paths give EXDEV. */
int kf_tool_open_beneath(int wsfd, const char *path, int flags, bool nosymlinks);

/* Reads the regular file open at fd whole into out (appended), refusing more than cap bytes.
 * Returns 0, -EFBIG when it is larger, or -errno. */
int kf_tool_read_fd(int fd, size_t cap, struct kf_buf *out);

/* Writes n bytes of data to name in the folder open at dirfd (an O_PATH descriptor is fine)
 * through a temporary file renamed over it, with permission bits mode. Returns 0 or -errno;
 * nothing is left behind on failure. */
int kf_tool_replace_file(int dirfd, const char *name, const void *data, size_t n, unsigned mode);

/* The tools. Each reads its checked arguments from c, appends its answer to c->text and sets
 * c->is_error when it failed; returns 0, or -1 on an internal failure (text says why). */
int kf_tool_read_file(struct kf_tool_call *c);
int kf_tool_write_file(struct kf_tool_call *c);
int kf_tool_edit_file(struct kf_tool_call *c);
int kf_tool_glob(struct kf_tool_call *c);
int kf_tool_grep(struct kf_tool_call *c);
int kf_tool_bash(struct kf_tool_call *c);

#endif
