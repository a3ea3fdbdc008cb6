"""Applications beyond the plain producer: transactional writers, processors, readers."""
