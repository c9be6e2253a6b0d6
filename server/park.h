/* park.h: parking requests without holding a thread. A handler that waits (POST
 * /v1/evaluations with "wait", the event stream between polls) suspends its connection here;
 * one thread resumes it after the delay, and MHD calls the handler (or the stream's reader)
 * again. So a waiting client costs no thread of the pool. */
#ifndef KF_SERVER_PARK_H
#define KF_SERVER_PARK_H

#include <microhttpd.h>
#include <stdbool.h>

struct kf_park;

/* A parking lot and its thread (started at once). NULL on failure. */
struct kf_park *kf_park_start(void);

/* Resumes every parked connection, refuses new ones and stops the thread. Call before
 * MHD_stop_daemon; kf_park_free after it. */
void kf_park_stop(struct kf_park *p);
void kf_park_free(struct kf_park *p);

/* Suspends conn (from its handler or content reader) and resumes it after delay_ms. Returns 0,
 * or -1 when stopping or out of memory (nothing suspended: the caller answers now). */
int kf_park(struct kf_park *p, struct MHD_Connection *conn, int delay_ms);

/* true when the client of conn closed its side (a parked request's client may leave while it
 * waits: nothing is read from a suspended connection, so MHD would not notice). */
bool kf_peer_gone(struct MHD_Connection *conn);

#endif
