// Failover tests: see the next commit.
