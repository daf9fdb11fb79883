"""Analysis: metrics over bucket arrays, series helpers, the thresholds table,
one detector per finding kind, and the cell status decided from the findings.

Kept free of imports so that the reading side can use `analysis.metrics`
without loading the detectors.
"""
