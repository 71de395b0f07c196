# Integration tests: a real daemon on a temporary socket, real clients.
