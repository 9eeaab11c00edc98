"""Posterior: the fitter and exact refits, the belief q_t, transfer, diagnostics, sensitivity
reports, and belief files on disk.

Evidence → (``models/``) → posterior DataTrees → q_t: this package is the one seam between
``belief`` and the PyMC models.
"""
