int ibvd_placeholder_r(void); int ibvd_placeholder_r(void) { return 0; }
