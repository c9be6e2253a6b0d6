/* queue.h: the Redis client (hiredis) for dispatch, rate limits and liveness. Redis only
 * dispatches: PostgreSQL holds every job's truth, so anything here can be rebuilt by the
 * reconciler. One struct kf_queue is one connection, used by one thread at a time; a lost
 * connection is re-opened on the next call.
 *
 * Keys (lib/README.md has the whole protocol):
 *   kforge:jobs:CLASS   a stream per class of worker ("cpu", "cuda", "h200", ...), entries
 *                       {job: UUID}; consumer group "workers"
 *   kforge:jobs:CLASS:ids  the jobs that have an unacknowledged entry there (a set)
 *   kforge:dead         the dead-letter stream, entries {job: UUID, class, reason}
 *   kforge:rl:KEYID:MIN the per-key rate-limit counter of one minute
 *   kforge:hb:WORKER    a worker's heartbeat (value: JSON; expires after 3 heartbeats)
 *   kforge:classes      the classes workers serve (a sorted set, scored by each class's
 *                       last heartbeat in wall-clock ms): what /readyz needs a live worker of */
#ifndef KF_QUEUE_H
#define KF_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

struct kf_queue;

#define KF_QUEUE_GROUP "workers"
#define KF_QUEUE_DEAD "kforge:dead"
#define KF_STREAM_ID_MAX 48

/* Connects to url: redis://[:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH, either with
 * ?password_file=PATH to read the password (AUTH) from a file that only its owner may read, so
 * that the URL holds no secret. NULL with a reason in err. timeout_ms bounds connect and every
 * command. The caller owns the result (kf_queue_close). */
struct kf_queue *kf_queue_open(const char *url, int timeout_ms, char *err, size_t errlen);
void kf_queue_close(struct kf_queue *q);
const char *kf_queue_error(const struct kf_queue *q);

/* PING; 0 when Redis answered. */
int kf_queue_ping(struct kf_queue *q);

/* The stream name of a class into out ("kforge:jobs:" CLASS). */
void kf_queue_stream(const char *klass, char *out, size_t n);

/* Creates the consumer group on the stream (MKSTREAM) if missing. 0 or -1. */
int kf_queue_ensure_group(struct kf_queue *q, const char *stream);

/* XADD stream * job JOB_ID, and JOB_ID into the set STREAM:ids of the jobs that have an entry
 * (the reconciler's way to tell a job waiting its turn from one whose entry was lost); the
 * entry id into id (may be NULL). 0 or -1. */
int kf_queue_add(struct kf_queue *q, const char *stream, const char *job_id,
                 char id[KF_STREAM_ID_MAX]);

/* XREADGROUP GROUP workers CONSUMER COUNT 1 BLOCK block_ms STREAMS stream >. Returns 1 with
 * the job and entry ids, 0 when nothing came within block_ms, -1 on error. */
int kf_queue_read(struct kf_queue *q, const char *stream, const char *consumer, int block_ms,
                  char job_id[40], char id[KF_STREAM_ID_MAX]);

/* XAUTOCLAIM stream workers CONSUMER min_idle_ms 0-0 COUNT 1: takes over one entry whose
 * consumer has not acknowledged it for min_idle_ms. Returns 1, 0 (none) or -1. */
int kf_queue_autoclaim(struct kf_queue *q, const char *stream, const char *consumer,
                       long min_idle_ms, char job_id[40], char id[KF_STREAM_ID_MAX]);

/* XACK and XDEL of an entry, and job_id (NULL: unknown) out of STREAM:ids. 0 or -1. */
int kf_queue_ack(struct kf_queue *q, const char *stream, const char *id, const char *job_id);

/* 1 when job_id has an entry on the stream that no worker acknowledged yet (by STREAM:ids), 0
 * when not (or Redis lost its data), -1 on error. */
int kf_queue_has_job(struct kf_queue *q, const char *stream, const char *job_id);

/* XADD kforge:dead * job JOB class CLASS reason REASON. 0 or -1. */
int kf_queue_dead_letter(struct kf_queue *q, const char *job_id, const char *klass,
                         const char *reason);

/* Entries in the stream (XLEN) and pending in the group (XPENDING count); -1 on error. */
long kf_queue_len(struct kf_queue *q, const char *stream);
long kf_queue_pending(struct kf_queue *q, const char *stream);

/* Counts one request of key_id in the current minute; returns the count so far (the caller
 * compares with the limit and answers 429), or -1 on error. *retry_after_s gets the seconds
 * left in the minute. */
long kf_queue_rate_hit(struct kf_queue *q, const char *key_id, int *retry_after_s);

/* SET kforge:hb:WORKER JSON EX ttl_s. 0 or -1. */
int kf_queue_heartbeat(struct kf_queue *q, const char *worker, const char *json, int ttl_s);

/* The workers whose heartbeat is alive: calls fn(worker, json, arg) for each. Returns the
 * count or -1. */
typedef void (*kf_queue_hb_fn)(const char *worker, const char *json, void *arg);
long kf_queue_heartbeats(struct kf_queue *q, kf_queue_hb_fn fn, void *arg);

/* ZADD kforge:classes NOW_MS klass: a worker of klass is alive (each heartbeat). 0 or -1. */
int kf_queue_class_beat(struct kf_queue *q, const char *klass);

/* The classes a worker beat for since since_ms (wall clock): calls fn(klass, arg) for each.
 * Returns the count or -1. */
typedef void (*kf_queue_class_fn)(const char *klass, void *arg);
long kf_queue_classes(struct kf_queue *q, long long since_ms, kf_queue_class_fn fn, void *arg);

/* ZREM kforge:classes klass: the class's last worker stopped on purpose. 0 or -1. */
int kf_queue_class_forget(struct kf_queue *q, const char *klass);

/* DEL kforge:hb:WORKER: the worker stopped on purpose. 0 or -1. */
int kf_queue_heartbeat_end(struct kf_queue *q, const char *worker);

#endif
