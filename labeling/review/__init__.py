"""Review: campaigns, the queue and its leases, labels, validation, disputes, the labelling flow."""
