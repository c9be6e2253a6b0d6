/* slots.h: counted slots per holder, with a limit per holder and one for all: the server's
 * open event streams, per API key (the holder "" stands for every client without a key). */
#ifndef KF_SERVER_SLOTS_H
#define KF_SERVER_SLOTS_H

#include <stdbool.h>

struct kf_slots;

/* An empty table. NULL when out of memory; free with kf_slots_free. */
struct kf_slots *kf_slots_new(void);
void kf_slots_free(struct kf_slots *s);

enum kf_slot_take { KF_SLOT_TAKEN, KF_SLOT_HOLDER_FULL, KF_SLOT_ALL_FULL };

/* Takes a slot for holder (copied; at most 63 bytes are kept) when it holds fewer than
 * per_holder and all holders fewer than total (0 for either: none may be taken). */
enum kf_slot_take kf_slots_take(struct kf_slots *s, const char *holder, long per_holder,
                                long total);

/* Gives back a slot holder took. */
void kf_slots_give(struct kf_slots *s, const char *holder);

/* The slots taken in all. */
long kf_slots_total(struct kf_slots *s);

#endif
