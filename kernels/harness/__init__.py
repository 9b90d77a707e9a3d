"""The bundled kernels' timing harness: L2 flush, CUDA-event and CUDA-graph timers, statistics,
the contract checks, params.json resolution, and the generic bench driver (CSV and A/B mode).

Self-contained (torch, triton, numpy only; never imports kopt's engine) and imported by
relative imports only, so the same folder works as `kernels.harness` inside kopt and as a
top-level `harness` package in a materialized kernel repo (kernels/catalog.py copies it).
"""
