/* conn_guard.h: the server's front door. It owns the listening socket and one thread that
 * accepts connections, counts them per client address and in all, and reads each new
 * connection's first request head without consuming it (MSG_PEEK) until the head is complete.
 * A head that http_head.h passes goes to libmicrohttpd (MHD_add_connection), which then reads
 * the same bytes; anything else is answered here with the registry's JSON error and a request
 * id, and closed:
 *   - a client over per_client_connections: 429 too_many_connections (Retry-After: 1);
 *   - the server over max_connections: 503 server_busy;
 *   - a head not complete header_timeout_s after the connection's start: 408 request_timeout.
 *     The deadline runs from the start; bytes that arrive do not move it (libmicrohttpd's own
 *     timeout restarts at each read, so a client sending a header line every few seconds
 *     would hold its connection forever);
 *   - a head libmicrohttpd would refuse itself (its refusals are HTML): 400, 413, 414, 431 or
 *     505 as http_head.h lists.
 * On a kept-alive connection libmicrohttpd reads the later heads; the guard still bounds each:
 * from the end of one request to the end of the next one's headers, header_timeout_s again,
 * after which it shuts the socket down (the dispatcher reports the two moments).
 *
 * Threads: the guard's own thread, and libmicrohttpd's, which call kf_guard_notify and the two
 * request hooks; the shared state is under one mutex. */
#ifndef KF_SERVER_CONN_GUARD_H
#define KF_SERVER_CONN_GUARD_H

#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log.h"

struct kf_guard;

struct kf_guard_settings {
    long max_connections;   /* open connections in all (accepted, not yet closed) */
    long per_client;        /* open connections of one address; 0: no limit */
    long header_timeout_ms; /* from a connection's start or its last response to a head's end */
    size_t max_head;        /* a request head's bytes */
    int64_t max_body;       /* a larger Content-Length is refused (413) */
};

/* Counters for /metrics: open connections now, and refusals since the start by reason. */
struct kf_guard_stats {
    long open;
    long refused_client, refused_busy, timed_out, bad_head;
};

/* Binds and listens on addr (backlog 1024); nothing is accepted before kf_guard_start. Returns
 * the guard (free with kf_guard_free), or NULL with errno set. log is copied. */
struct kf_guard *kf_guard_open(const struct sockaddr *addr, socklen_t addrlen,
                               const struct kf_guard_settings *settings,
                               const struct kf_log_ctx *log);

/* The port the socket is bound to (the one picked when 0 was asked for). */
unsigned kf_guard_port(const struct kf_guard *g);

/* Starts the thread that accepts, checks and hands connections to daemon, which must have
 * been started with MHD_USE_NO_LISTEN_SOCKET, MHD_USE_ITC and kf_guard_notify as its
 * MHD_OPTION_NOTIFY_CONNECTION (cls g). Returns 0, or -1. */
int kf_guard_start(struct kf_guard *g, struct MHD_Daemon *daemon);

/* Stops accepting, closes the connections not handed over yet and joins the thread. Call
 * before MHD_stop_daemon; kf_guard_free after it (libmicrohttpd reports its closes to g). */
void kf_guard_stop(struct kf_guard *g);
void kf_guard_free(struct kf_guard *g);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the guard): a handed-over
 * connection starts being tracked, and a closed one gives its client's slot back. */
void kf_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);

/* From the dispatcher: a request's headers arrived on conn (its first call), and a request
 * on conn ended (its completion): the next head's deadline starts then. */
void kf_guard_request_begins(struct kf_guard *g, struct MHD_Connection *conn);
void kf_guard_request_ends(struct kf_guard *g, struct MHD_Connection *conn);

void kf_guard_stats(struct kf_guard *g, struct kf_guard_stats *out);

#endif
