/* log.h: one line per event on stderr, logfmt, carrying the identity of what it is about:
 *   ts=2026-12-01T02:03:04.123Z level=info req=R job=J episode=E worker=W msg="..." k=v ...
 * Fields that are NULL are left out. Thread-safe (one write(2) per line). */
#ifndef KF_LOG_H
#define KF_LOG_H

enum kf_log_level { KF_LOG_DEBUG, KF_LOG_INFO, KF_LOG_WARN, KF_LOG_ERROR };

/* The identity a line carries; every field optional, borrowed for the call. */
struct kf_log_ctx {
    const char *request_id;
    const char *job_id;
    const char *episode_id;
    const char *worker; /* e.g. "gpu0" or "cpu" */
    enum kf_log_level min_level;
};

/* Parses "debug", "info", "warn", "error"; unknown text gives KF_LOG_INFO. */
enum kf_log_level kf_log_parse_level(const char *s);

/* Writes one line if level >= ctx->min_level (ctx may be NULL: level info and up, no ids).
 * fmt is the message; it is quoted and escaped. */
void kf_log(const struct kf_log_ctx *ctx, enum kf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
