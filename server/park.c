/* park.c: suspended connections and the thread that resumes them when due. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "park.h"
#include "util.h"

struct parked {
    struct MHD_Connection *conn;
    int64_t due_ms;
    struct parked *next;
};

struct kf_park {
    pthread_mutex_t lock;
    pthread_t thread;
    bool stopping;
    bool joined;
    struct parked *list;
};

static void resume_due(struct kf_park *p, bool all) {
    int64_t now = kf_now_ms();
    pthread_mutex_lock(&p->lock);
    struct parked **pp = &p->list;
    while (*pp) {
        struct parked *e = *pp;
        if (all || e->due_ms <= now) {
            *pp = e->next;
            MHD_resume_connection(e->conn);
            free(e);
        } else
            pp = &e->next;
    }
    pthread_mutex_unlock(&p->lock);
}

static void *park_thread(void *arg) {
    struct kf_park *p = arg;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&p->lock);
        bool stop = p->stopping;
        pthread_mutex_unlock(&p->lock);
        resume_due(p, stop);
        if (stop)
            return NULL;
        nanosleep(&tick, NULL);
    }
}

struct kf_park *kf_park_start(void) {
    struct kf_park *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (pthread_create(&p->thread, NULL, park_thread, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void kf_park_stop(struct kf_park *p) {
    if (!p)
        return;
    if (p->joined)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    p->joined = true;
    resume_due(p, true);
}

void kf_park_free(struct kf_park *p) {
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int kf_park(struct kf_park *p, struct MHD_Connection *conn, int delay_ms) {
    struct parked *e = malloc(sizeof *e);
    if (!e)
        return -1;
    e->conn = conn;
    e->due_ms = kf_now_ms() + delay_ms;
    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        pthread_mutex_unlock(&p->lock);
        free(e);
        return -1;
    }
    MHD_suspend_connection(conn);
    e->next = p->list;
    p->list = e;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

bool kf_peer_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    char c;
    return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}
