"""Topic compaction: the compactor, what it reads and writes per entry, and compacted reads."""
