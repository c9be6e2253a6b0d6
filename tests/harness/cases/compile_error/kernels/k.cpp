extern "C" int relu2(const float* x, float* y, long n) { return undefined_thing(x); }
