"""retrieval stage."""
