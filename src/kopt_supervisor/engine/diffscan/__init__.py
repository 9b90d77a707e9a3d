"""Reading a candidate's diff for constructs that reach outside the kernel: the scan is in scan.py."""
