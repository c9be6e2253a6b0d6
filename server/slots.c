/* slots.c: counted slots per holder (slots.h), a short list under one mutex: holders with an
 * open stream are few, and a holder leaves the list when it gives its last slot back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slots.h"

#define KF_HOLDER_MAX 64

struct holder {
    char name[KF_HOLDER_MAX];
    long n;
    struct holder *next;
};

struct kf_slots {
    pthread_mutex_t lock;
    struct holder *list;
    long total;
};

struct kf_slots *kf_slots_new(void) {
    struct kf_slots *s = calloc(1, sizeof *s);
    if (s && pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void kf_slots_free(struct kf_slots *s) {
    if (!s)
        return;
    for (struct holder *h = s->list, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static struct holder **find(struct kf_slots *s, const char *name) {
    struct holder **pp = &s->list;
    while (*pp && strncmp((*pp)->name, name, KF_HOLDER_MAX - 1) != 0)
        pp = &(*pp)->next;
    return pp;
}

enum kf_slot_take kf_slots_take(struct kf_slots *s, const char *holder, long per_holder,
                                long total) {
    enum kf_slot_take out = KF_SLOT_TAKEN;
    pthread_mutex_lock(&s->lock);
    struct holder **pp = find(s, holder);
    if (s->total >= total)
        out = KF_SLOT_ALL_FULL;
    else if ((*pp ? (*pp)->n : 0) >= per_holder)
        out = KF_SLOT_HOLDER_FULL;
    else if (!*pp && !(*pp = calloc(1, sizeof **pp)))
        out = KF_SLOT_ALL_FULL; /* out of memory */
    if (out == KF_SLOT_TAKEN) {
        snprintf((*pp)->name, KF_HOLDER_MAX, "%s", holder);
        (*pp)->n++;
        s->total++;
    }
    pthread_mutex_unlock(&s->lock);
    return out;
}

void kf_slots_give(struct kf_slots *s, const char *holder) {
    pthread_mutex_lock(&s->lock);
    struct holder **pp = find(s, holder);
    struct holder *h = *pp;
    if (h) {
        s->total--;
        if (--h->n <= 0) {
            *pp = h->next;
            free(h);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

long kf_slots_total(struct kf_slots *s) {
    pthread_mutex_lock(&s->lock);
    long n = s->total;
    pthread_mutex_unlock(&s->lock);
    return n;
}
