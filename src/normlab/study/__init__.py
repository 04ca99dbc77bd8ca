"""Studies: claims as code, their runs, the SQLite registry, parallel workers, verdicts."""
