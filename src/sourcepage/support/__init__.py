"""support stage."""
