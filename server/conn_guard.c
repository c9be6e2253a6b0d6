/* conn_guard.c: the front door (conn_guard.h): accepting, per-client counts, the head check
 * before libmicrohttpd, the header deadline, and the JSON refusals. */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "conn_guard.h"
#include "http_head.h"
#include "kf_errors.h"
#include "util.h"

#define KF_GUARD_BUCKETS 1024
#define KF_GUARD_TICK_MS 100
#define KF_GUARD_LINGER_MS 1000 /* a refused connection is read and dropped this long */
#define KF_GUARD_LINGER_MAX 256 /* refusals at the door that linger at once; more: closed */
#define KF_GUARD_ACCEPTS 64     /* accepts per wake-up, so that heads are read in between */

/* One client address and its open connections (accepted, not closed). */
struct client {
    unsigned char ip[16]; /* IPv4 as ::ffff:a.b.c.d */
    long conns;
    struct client *next;
};

/* A connection the guard holds: reading its first head, or lingering after a refusal. */
struct pend {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct client *client; /* NULL: refused at the door (not counted) */
    int64_t deadline_ms;
    bool lingering;
    struct pend *prev, *next;
};

/* A connection libmicrohttpd holds (its socket_context). */
struct held {
    int fd;
    struct client *client;
    bool waiting;     /* between requests: the next head's deadline runs */
    int64_t since_ms; /* when it started waiting */
    struct held *prev, *next;
};

struct kf_guard {
    struct kf_guard_settings set;
    struct kf_log_ctx log;
    int lfd, efd, wake;
    unsigned port;
    pthread_t thread;
    bool started;
    struct MHD_Daemon *daemon;
    char *peek; /* max_head + 1 bytes, the guard thread's */
    /* the guard thread's alone */
    struct pend *pending;
    int lingering_refusals;
    int64_t accept_paused_until;
    /* under lock */
    pthread_mutex_t lock;
    bool stopping;
    struct client *buckets[KF_GUARD_BUCKETS];
    long open;
    struct held *held;
    struct kf_guard_stats stats;
};

/* ---- client addresses -------------------------------------------------------------------- */

static void ip_of(const struct sockaddr *sa, unsigned char ip[16]) {
    memset(ip, 0, 16);
    if (sa && sa->sa_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    } else if (sa && sa->sa_family == AF_INET) {
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    }
}

static unsigned bucket_of(const unsigned char ip[16]) {
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ ip[i]) * 16777619u;
    return h % KF_GUARD_BUCKETS;
}

/* Under lock: the client of ip, added (with no connection) when create is set. */
static struct client *client_find(struct kf_guard *g, const unsigned char ip[16], bool create) {
    unsigned b = bucket_of(ip);
    for (struct client *c = g->buckets[b]; c; c = c->next)
        if (memcmp(c->ip, ip, 16) == 0)
            return c;
    if (!create)
        return NULL;
    struct client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    memcpy(c->ip, ip, 16);
    c->next = g->buckets[b];
    g->buckets[b] = c;
    return c;
}

/* Under lock: one connection of c ends; the client goes when it has none left. */
static void client_release(struct kf_guard *g, struct client *c) {
    if (!c)
        return;
    g->open--;
    if (--c->conns > 0)
        return;
    struct client **pp = &g->buckets[bucket_of(c->ip)];
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    free(c);
}

/* ---- replies at the door ----------------------------------------------------------------- */

static const char *reason_phrase(unsigned status) {
    switch (status) {
    case 400:
        return "Bad Request";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* Writes the registry's error for e (message: NULL for its hint) on fd, with a request id (the
 * client's when it sent a valid one), Connection: close and Retry-After where it is worth
 * retrying, and logs it. Best effort: the socket is non-blocking and the reply small. */
static void reply_error(struct kf_guard *g, int fd, enum kf_err e, const char *message,
                        const char *client_request_id) {
    const struct kf_err_info *info = kf_err_info(e);
    if (!info)
        return;
    char rid[65];
    if (client_request_id && client_request_id[0])
        snprintf(rid, sizeof rid, "%s", client_request_id);
    else if (kf_uuid_new(rid) != 0)
        snprintf(rid, sizeof rid, "guard-%lld", (long long)kf_now_ms());
    json_t *body =
        json_pack("{s:{s:i, s:s, s:s, s:s}}", "error", "code", info->code, "name", info->name,
                  "message", message ? message : info->hint, "request_id", rid);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return;
    unsigned status = (unsigned)info->http_status;
    bool retry = status == 429 || status == 503;
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                      "Cache-Control: no-store\r\nX-Request-Id: %s\r\nConnection: close\r\n"
                      "%sContent-Length: %zu\r\n\r\n",
                      status, reason_phrase(status), rid, retry ? "Retry-After: 1\r\n" : "",
                      strlen(text));
    if (hn > 0 && (size_t)hn < sizeof head) {
        (void)!send(fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
        (void)!send(fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    struct kf_log_ctx lc = g->log;
    lc.request_id = rid;
    kf_log(&lc, KF_LOG_INFO, "refused at the door: status=%u %s: %s", status, info->name,
           message ? message : info->hint);
    free(text);
}

/* Reads and drops what fd has; false at its end (EOF or an error). */
static bool drain(int fd, char *buf, size_t n) {
    for (;;) {
        ssize_t got = recv(fd, buf, n, MSG_DONTWAIT);
        if (got > 0)
            continue;
        return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    }
}

/* ---- connections the guard holds ---------------------------------------------------------- */

static void pend_unlink(struct kf_guard *g, struct pend *p) {
    if (p->prev)
        p->prev->next = p->next;
    else
        g->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

static void pend_link(struct kf_guard *g, struct pend *p) {
    p->prev = NULL;
    p->next = g->pending;
    if (g->pending)
        g->pending->prev = p;
    g->pending = p;
}

/* Closes p's socket, gives its client's slot back and frees it. */
static void pend_close(struct kf_guard *g, struct pend *p) {
    pend_unlink(g, p);
    epoll_ctl(g->efd, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    if (p->client) {
        pthread_mutex_lock(&g->lock);
        client_release(g, p->client);
        pthread_mutex_unlock(&g->lock);
    } else {
        g->lingering_refusals--;
    }
    free(p);
}

/* After a refusal: read and drop what comes for a short while, so that closing does not reset
 * the connection before the client read the reply. */
static void pend_linger(struct kf_guard *g, struct pend *p) {
    if (!drain(p->fd, g->peek, g->set.max_head + 1)) {
        pend_close(g, p);
        return;
    }
    shutdown(p->fd, SHUT_WR);
    p->lingering = true;
    p->deadline_ms = kf_now_ms() + KF_GUARD_LINGER_MS;
}

/* libmicrohttpd takes p; on failure its client's slot is given back (MHD closed the socket). */
static void hand_over(struct kf_guard *g, struct pend *p) {
    pend_unlink(g, p);
    epoll_ctl(g->efd, EPOLL_CTL_DEL, p->fd, NULL);
    if (MHD_add_connection(g->daemon, p->fd, (const struct sockaddr *)&p->addr, p->addrlen) !=
        MHD_YES) {
        kf_log(&g->log, KF_LOG_WARN, "libmicrohttpd refused a connection: %s", strerror(errno));
        pthread_mutex_lock(&g->lock);
        client_release(g, p->client);
        pthread_mutex_unlock(&g->lock);
    }
    free(p);
}

/* New bytes (or the end) on a connection whose head is not complete yet. */
static void on_readable(struct kf_guard *g, struct pend *p) {
    if (p->lingering) {
        if (!drain(p->fd, g->peek, g->set.max_head + 1))
            pend_close(g, p);
        return;
    }
    ssize_t n = recv(p->fd, g->peek, g->set.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        pend_close(g, p); /* the client went away before a whole head */
        return;
    }
    struct kf_head_limits lim = {.max_head = g->set.max_head, .max_body = g->set.max_body};
    struct kf_head_result res;
    switch (kf_head_check(g->peek, (size_t)n, &lim, &res)) {
    case KF_HEAD_OK:
        hand_over(g, p);
        return;
    case KF_HEAD_BAD:
        pthread_mutex_lock(&g->lock);
        g->stats.bad_head++;
        pthread_mutex_unlock(&g->lock);
        reply_error(g, p->fd, res.err, res.message, res.request_id);
        pend_linger(g, p);
        return;
    case KF_HEAD_INCOMPLETE:
        return;
    }
}

/* Answers a connection refused at accept; it lingers when few others do, else closes now. */
static void refuse_at_door(struct kf_guard *g, int fd, const struct sockaddr_storage *addr,
                           socklen_t addrlen, enum kf_err e) {
    reply_error(g, fd, e, NULL, NULL);
    struct pend *p = g->lingering_refusals < KF_GUARD_LINGER_MAX ? calloc(1, sizeof *p) : NULL;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};
    if (p) {
        p->fd = fd;
        p->addr = *addr;
        p->addrlen = addrlen;
        ev.data.ptr = p;
    }
    if (!p || epoll_ctl(g->efd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        free(p);
        close(fd);
        return;
    }
    g->lingering_refusals++;
    pend_link(g, p);
    pend_linger(g, p);
}

static void accept_some(struct kf_guard *g) {
    int64_t now = kf_now_ms();
    for (int i = 0; i < KF_GUARD_ACCEPTS; i++) {
        struct sockaddr_storage addr;
        socklen_t addrlen = sizeof addr;
        int fd = accept4(g->lfd, (struct sockaddr *)&addr, &addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: leave the backlog alone for a moment */
                kf_log(&g->log, KF_LOG_WARN, "accept: %s; pausing 100 ms", strerror(errno));
                g->accept_paused_until = now + 100;
                struct epoll_event ev = {.events = 0, .data.ptr = NULL};
                epoll_ctl(g->efd, EPOLL_CTL_MOD, g->lfd, &ev);
            }
            return;
        }
        unsigned char ip[16];
        ip_of((const struct sockaddr *)&addr, ip);
        enum kf_err refusal = KF_E_INTERNAL;
        struct client *c = NULL;
        pthread_mutex_lock(&g->lock);
        if (g->open >= g->set.max_connections) {
            refusal = KF_E_SERVER_BUSY;
            g->stats.refused_busy++;
        } else if (!(c = client_find(g, ip, true))) {
            refusal = KF_E_SERVER_BUSY; /* out of memory */
        } else if (g->set.per_client > 0 && c->conns >= g->set.per_client) {
            refusal = KF_E_TOO_MANY_CONNECTIONS;
            g->stats.refused_client++;
            c = NULL;
        } else {
            c->conns++;
            g->open++;
        }
        pthread_mutex_unlock(&g->lock);
        struct pend *p = c ? calloc(1, sizeof *p) : NULL;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = p};
        if (p) {
            p->fd = fd;
            p->addr = addr;
            p->addrlen = addrlen;
            p->client = c;
            p->deadline_ms = now + g->set.header_timeout_ms;
            pend_link(g, p);
            if (epoll_ctl(g->efd, EPOLL_CTL_ADD, fd, &ev) != 0) {
                kf_log(&g->log, KF_LOG_WARN, "epoll_ctl: %s", strerror(errno));
                pend_close(g, p);
            } else {
                on_readable(g, p); /* the head may be there already */
            }
            continue;
        }
        if (c) { /* out of memory: give the slot back */
            pthread_mutex_lock(&g->lock);
            client_release(g, c);
            pthread_mutex_unlock(&g->lock);
            refusal = KF_E_SERVER_BUSY;
        }
        refuse_at_door(g, fd, &addr, addrlen, refusal);
    }
}

/* Deadlines: heads not complete in time (408), lingering refusals (closed), and kept-alive
 * connections of libmicrohttpd whose next head did not come in time (shut down). */
static void sweep(struct kf_guard *g) {
    int64_t now = kf_now_ms();
    for (struct pend *p = g->pending, *next; p; p = next) {
        next = p->next;
        if (p->deadline_ms > now)
            continue;
        if (p->lingering) {
            pend_close(g, p);
            continue;
        }
        pthread_mutex_lock(&g->lock);
        g->stats.timed_out++;
        pthread_mutex_unlock(&g->lock);
        char msg[128];
        snprintf(msg, sizeof msg, "the request's headers did not arrive within %ld ms",
                 g->set.header_timeout_ms);
        /* the client's X-Request-Id, when its line came whole */
        struct kf_head_limits lim = {.max_head = g->set.max_head, .max_body = INT64_MAX};
        struct kf_head_result res = {.request_id = ""};
        ssize_t n = recv(p->fd, g->peek, g->set.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0)
            kf_head_check(g->peek, (size_t)n, &lim, &res);
        reply_error(g, p->fd, KF_E_REQUEST_TIMEOUT, msg, res.request_id);
        pend_linger(g, p);
    }
    pthread_mutex_lock(&g->lock);
    for (struct held *h = g->held; h; h = h->next) {
        if (h->waiting && now - h->since_ms >= g->set.header_timeout_ms) {
            h->waiting = false;
            g->stats.timed_out++;
            shutdown(h->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
        }
    }
    pthread_mutex_unlock(&g->lock);
    if (g->accept_paused_until && now >= g->accept_paused_until) {
        g->accept_paused_until = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(g->efd, EPOLL_CTL_MOD, g->lfd, &ev);
    }
}

static void *guard_main(void *arg) {
    struct kf_guard *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(g->efd, evs, 64, KF_GUARD_TICK_MS);
        pthread_mutex_lock(&g->lock);
        bool stop = g->stopping;
        pthread_mutex_unlock(&g->lock);
        if (stop)
            break;
        for (int i = 0; i < n; i++) {
            struct pend *p = evs[i].data.ptr;
            if (p == NULL)
                accept_some(g);
            else if ((void *)p != (void *)g) /* g itself: the wake-up eventfd */
                on_readable(g, p);
        }
        sweep(g);
    }
    while (g->pending)
        pend_close(g, g->pending);
    return NULL;
}

/* ---- the public calls --------------------------------------------------------------------- */

struct kf_guard *kf_guard_open(const struct sockaddr *addr, socklen_t addrlen,
                               const struct kf_guard_settings *settings,
                               const struct kf_log_ctx *log) {
    struct kf_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->set = *settings;
    g->log = *log;
    g->lfd = g->efd = g->wake = -1;
    g->peek = malloc(settings->max_head + 1);
    if (!g->peek || pthread_mutex_init(&g->lock, NULL) != 0) {
        free(g->peek);
        free(g);
        return NULL;
    }
    int one = 1;
    g->lfd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->lfd < 0 || setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(g->lfd, addr, addrlen) != 0 || listen(g->lfd, 1024) != 0)
        goto fail;
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(g->lfd, (struct sockaddr *)&bound, &blen) != 0)
        goto fail;
    g->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)(void *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)(void *)&bound)->sin_port);
    g->efd = epoll_create1(EPOLL_CLOEXEC);
    g->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = g};
    if (g->efd < 0 || g->wake < 0 || epoll_ctl(g->efd, EPOLL_CTL_ADD, g->lfd, &lev) != 0 ||
        epoll_ctl(g->efd, EPOLL_CTL_ADD, g->wake, &wev) != 0)
        goto fail;
    return g;
fail:;
    int err = errno;
    kf_guard_free(g);
    errno = err;
    return NULL;
}

unsigned kf_guard_port(const struct kf_guard *g) {
    return g->port;
}

int kf_guard_start(struct kf_guard *g, struct MHD_Daemon *daemon) {
    g->daemon = daemon;
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0)
        return -1;
    g->started = true;
    return 0;
}

void kf_guard_stop(struct kf_guard *g) {
    if (!g || !g->started)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_mutex_unlock(&g->lock);
    uint64_t one = 1;
    (void)!write(g->wake, &one, sizeof one);
    pthread_join(g->thread, NULL);
    g->started = false;
    if (g->lfd >= 0)
        close(g->lfd);
    g->lfd = -1;
}

void kf_guard_free(struct kf_guard *g) {
    if (!g)
        return;
    kf_guard_stop(g);
    if (g->lfd >= 0)
        close(g->lfd);
    if (g->efd >= 0)
        close(g->efd);
    if (g->wake >= 0)
        close(g->wake);
    for (int b = 0; b < KF_GUARD_BUCKETS; b++) {
        for (struct client *c = g->buckets[b], *next; c; c = next) {
            next = c->next;
            free(c);
        }
    }
    for (struct held *h = g->held, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    pthread_mutex_destroy(&g->lock);
    free(g->peek);
    free(g);
}

void kf_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code) {
    struct kf_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        struct held *h = calloc(1, sizeof *h);
        if (!h)
            return; /* untracked: its slot stays taken */
        h->fd = fd ? fd->connect_fd : -1;
        unsigned char ip[16];
        ip_of(ad ? ad->client_addr : NULL, ip);
        pthread_mutex_lock(&g->lock);
        h->client = client_find(g, ip, false);
        h->next = g->held;
        if (g->held)
            g->held->prev = h;
        g->held = h;
        pthread_mutex_unlock(&g->lock);
        *socket_context = h;
        return;
    }
    struct held *h = *socket_context;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED || !h)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&g->lock);
    if (h->prev)
        h->prev->next = h->next;
    else
        g->held = h->next;
    if (h->next)
        h->next->prev = h->prev;
    client_release(g, h->client);
    pthread_mutex_unlock(&g->lock);
    free(h);
}

static void mark(struct kf_guard *g, struct MHD_Connection *conn, bool waiting) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct held *h = ci ? ci->socket_context : NULL;
    if (!h)
        return;
    pthread_mutex_lock(&g->lock);
    h->waiting = waiting;
    h->since_ms = kf_now_ms();
    pthread_mutex_unlock(&g->lock);
}

void kf_guard_request_begins(struct kf_guard *g, struct MHD_Connection *conn) {
    if (g)
        mark(g, conn, false);
}

void kf_guard_request_ends(struct kf_guard *g, struct MHD_Connection *conn) {
    if (g)
        mark(g, conn, true);
}

void kf_guard_stats(struct kf_guard *g, struct kf_guard_stats *out) {
    pthread_mutex_lock(&g->lock);
    *out = g->stats;
    out->open = g->open;
    pthread_mutex_unlock(&g->lock);
}
