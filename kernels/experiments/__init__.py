"""One-off GPU experiments whose figures go into docs/ (each documents its command at the top)."""
