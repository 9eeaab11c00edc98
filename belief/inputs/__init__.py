"""Inputs: candidates and budgets, the candidate file, evidence tables and folders, costs.

Everything a user hands to ``belief`` enters here and is validated once, at this boundary;
the other packages receive validated objects.  ``models/`` may import these types.
"""
