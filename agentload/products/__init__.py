"""Agent products as the workload: see registry.py (kept import-free: install.py runs under a bare Python)."""
