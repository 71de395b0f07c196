# unit tests (core)
