/* metrics.h: the server's own HTTP metrics (requests by route, method and status; latency
 * histograms by route), thread-safe. metrics_get.c adds the queue and job gauges. */
#ifndef KF_SERVER_METRICS_H
#define KF_SERVER_METRICS_H

#include <stdio.h>

struct kf_metrics;

/* nlabels route labels (their names borrowed for the life of the struct). NULL on no memory.
 * The caller owns the result (kf_metrics_free). */
struct kf_metrics *kf_metrics_new(const char *const *labels, int nlabels);
void kf_metrics_free(struct kf_metrics *m);

/* Counts one request of route label `label` (an index into the labels). */
void kf_metrics_observe(struct kf_metrics *m, int label, const char *method, unsigned status,
                        double seconds);

/* Writes the HTTP metrics in Prometheus text format. */
void kf_metrics_write(struct kf_metrics *m, FILE *out);

#endif
