"""The results store: schemas, checked reads, atomic writes, checksums and paths.

Depends on the standard library, numpy and pandas only."""
