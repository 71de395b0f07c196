# The implemented verbs: devices, contexts, queries, async events.
