"""Studies: claims as code, their runs, the SQLite ledger, parallel workers, verdicts."""
