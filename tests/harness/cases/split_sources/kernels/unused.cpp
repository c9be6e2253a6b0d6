extern "C" int kf_unused(void) { return 0; }
