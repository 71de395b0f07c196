# unit tests (client)
