"""Extraction: the dependency closure of one block over the index, assembled into one standalone
file with its original imports and a provenance header."""
