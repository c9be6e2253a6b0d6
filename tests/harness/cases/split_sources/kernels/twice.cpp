#include "twice.h"
extern "C" int kf_twice(const float *x, float *y, long n) {
    for (long i = 0; i < n; ++i) y[i] = kf_two * x[i];
    return 0;
}
