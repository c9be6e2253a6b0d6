/* metrics.c: counters and latency histograms of the HTTP requests, in fixed tables under one
 * mutex (a lock per request is cheap next to the request). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define KF_MAX_SERIES 512
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define KF_NB (sizeof bounds / sizeof bounds[0])

struct series {
    int label;
    char method[8];
    unsigned status;
    uint64_t count;
};

struct hist {
    uint64_t buckets[KF_NB]; /* non-cumulative; written cumulatively */
    uint64_t count;
    double sum;
};

struct kf_metrics {
    pthread_mutex_t lock;
    const char *const *labels;
    int nlabels;
    struct series series[KF_MAX_SERIES];
    int nseries;
    struct hist *hists; /* one per label */
};

struct kf_metrics *kf_metrics_new(const char *const *labels, int nlabels) {
    struct kf_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->hists = calloc((size_t)nlabels, sizeof *m->hists);
    if (!m->hists || pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m->hists);
        free(m);
        return NULL;
    }
    m->labels = labels;
    m->nlabels = nlabels;
    return m;
}

void kf_metrics_free(struct kf_metrics *m) {
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->hists);
    free(m);
}

static const char *method_label(const char *method) {
    static const char *const known[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(method, known[i]) == 0)
            return known[i];
    return "OTHER";
}

void kf_metrics_observe(struct kf_metrics *m, int label, const char *method, unsigned status,
                        double seconds) {
    if (!m || label < 0 || label >= m->nlabels)
        return;
    const char *meth = method_label(method ? method : "");
    pthread_mutex_lock(&m->lock);
    struct series *s = NULL;
    for (int i = 0; i < m->nseries && !s; i++)
        if (m->series[i].label == label && m->series[i].status == status &&
            strcmp(m->series[i].method, meth) == 0)
            s = &m->series[i];
    if (!s && m->nseries < KF_MAX_SERIES) {
        s = &m->series[m->nseries++];
        s->label = label;
        s->status = status;
        strncpy(s->method, meth, sizeof s->method - 1);
    }
    if (s)
        s->count++;
    struct hist *h = &m->hists[label];
    size_t b = 0;
    while (b < KF_NB && seconds > bounds[b])
        b++;
    if (b < KF_NB)
        h->buckets[b]++;
    h->count++;
    h->sum += seconds;
    pthread_mutex_unlock(&m->lock);
}

void kf_metrics_write(struct kf_metrics *m, FILE *out) {
    pthread_mutex_lock(&m->lock);
    fputs("# HELP kforge_http_requests_total HTTP requests by route template, method and status.\n"
          "# TYPE kforge_http_requests_total counter\n",
          out);
    for (int i = 0; i < m->nseries; i++) {
        const struct series *s = &m->series[i];
        fprintf(out, "kforge_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n",
                m->labels[s->label], s->method, s->status, (unsigned long long)s->count);
    }
    fputs("# HELP kforge_http_request_duration_seconds HTTP request latency by route template.\n"
          "# TYPE kforge_http_request_duration_seconds histogram\n",
          out);
    for (int l = 0; l < m->nlabels; l++) {
        const struct hist *h = &m->hists[l];
        if (h->count == 0)
            continue;
        uint64_t cum = 0;
        for (size_t b = 0; b < KF_NB; b++) {
            cum += h->buckets[b];
            fprintf(out,
                    "kforge_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                    m->labels[l], bounds[b], (unsigned long long)cum);
        }
        fprintf(out,
                "kforge_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                "kforge_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                "kforge_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                m->labels[l], (unsigned long long)h->count, m->labels[l], h->sum, m->labels[l],
                (unsigned long long)h->count);
    }
    pthread_mutex_unlock(&m->lock);
}
