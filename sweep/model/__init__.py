"""The recipe model: what a sweep is (recipe, space, search settings, job reference, inputs),
validated before anything runs. Imports nothing of the worker, the cluster or the client."""
