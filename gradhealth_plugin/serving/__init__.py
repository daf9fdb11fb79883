"""Serving: a run's analysis cached per run, and the answers built from it.

`analyzer` runs the reading and analysis once per run and data version;
`responses` turns that into the JSON of every route and of the CLI. The
plugin's routes and the ``gradhealth`` CLI both sit on top of these two.
"""
