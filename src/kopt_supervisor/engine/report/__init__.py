"""Reports: `kopt report` (results.md) and `kopt export` (a branch), both in report/writer.py."""
