"""Small widgets of the run dashboard: each shows one frozen view record from kopt_supervisor.kopt_tui.model."""
