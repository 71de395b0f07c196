# The shipped default configuration.
