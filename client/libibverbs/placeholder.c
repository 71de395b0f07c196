int ibvd_placeholder_v(void); int ibvd_placeholder_v(void) { return 0; }
