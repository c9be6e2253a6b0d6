extern "C" int kf_relu(const float *x, float *y, long n) {
    for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
    return 0;
}
