"""The reproducibility package: export a run folder as a zip with checksums, verify one
(checks)."""
