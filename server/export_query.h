/* export_query.h: the query of GET /v1/export, checked: its cursor (base64url of the last
 * export_seq given), limit, filters and format, and whether the client takes gzip. Parsing
 * is separate from the stream (export_get.c) so that every check answers 400 before anything
 * is read from PostgreSQL. */
#ifndef KF_SERVER_EXPORT_QUERY_H
#define KF_SERVER_EXPORT_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

#define KF_EXPORT_LIMIT_DEFAULT 100
#define KF_EXPORT_LIMIT_MAX 1000
#define KF_EXPORT_CURSOR_MAX 32 /* base64url of up to 18 digits, and a NUL */

/* The checked query. Every text is a NUL-terminated copy ("" = not given); the struct owns
 * nothing on the heap. */
struct kf_export_query {
    char after[24]; /* the export_seq after which to start ("0" without a cursor) */
    char cursor[KF_EXPORT_CURSOR_MAX]; /* the cursor given ("" none) */
    long limit;                        /* records in this page, 1..KF_EXPORT_LIMIT_MAX */
    char since[40], until[40];         /* RFC 3339 ("" none), on finished_at: since <= t < until */
    char task_id[37];                  /* a UUID ("" none) */
    char policy[16];                   /* openai or expert ("" none) */
    char min_reward[16];               /* an integer ("" none), final_reward >= it */
    bool rft;                          /* rejection fine-tuning filter */
    bool sft;                          /* format=sft (else trajectory) */
    bool gzip;                         /* Accept-Encoding takes gzip */
};

/* Reads the query of conn into q. Returns NULL when it is good, else the name of the bad
 * parameter, with a message for the client in msg. */
const char *kf_export_query_parse(struct MHD_Connection *conn, struct kf_export_query *q, char *msg,
                                  size_t msglen);

/* The cursor of an export_seq (decimal digits): base64url without padding, into out. */
void kf_export_cursor_encode(const char *seq, char out[KF_EXPORT_CURSOR_MAX]);

/* The export_seq of a cursor into seq (decimal digits, no sign, no leading zero); false when
 * the cursor is not one this server gives (only the canonical encoding is accepted). */
bool kf_export_cursor_decode(const char *cursor, char seq[24]);

/* true when s is an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)) with a
 * real calendar date. A space stands for the offset's '+' (a '+' left unescaped in a query). */
bool kf_rfc3339_valid(const char *s);

/* s, a date-time kf_rfc3339_valid passed, in UTC ("...Z", at most microseconds) into out:
 * RFC 3339 allows offsets up to 23:59, PostgreSQL up to 15:59. Times before year 1 or after
 * 9999 once in UTC are clamped to those years' ends. */
void kf_rfc3339_utc(const char *s, char out[40]);

/* true when an Accept-Encoding header value takes gzip (gzip or x-gzip, q not 0). */
bool kf_accepts_gzip(const char *accept_encoding);

#endif
