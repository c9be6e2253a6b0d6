static const float kf_two = 2.0f;
