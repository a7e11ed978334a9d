"""Robustness sweeps: grids of settings (grid), one cell each (cell), shared text stores
(text), the sweep itself (sweep), its report and figures."""
