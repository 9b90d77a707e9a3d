"""The TUI's screens: runs (home), dashboard, iteration detail, review, restart, logs, help."""
