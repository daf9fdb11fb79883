"""Reading: from TensorBoard's data provider to the run model the analysis works on.

- `tags`: which layer and role each tag describes (the naming conventions, user rules).
- `provider`: every read through the data provider (`Reader`), cached by what it lists.
- `cache`: the byte-bounded least-recently-used cache of per-tag results.
- `tables`: per-tag metric tables, computed only for the steps not seen before.
- `runs`: the run model (`RunData`, `Layer`, `RoleData`), building it, model order.
"""
