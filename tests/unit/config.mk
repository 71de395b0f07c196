# unit tests (config)
