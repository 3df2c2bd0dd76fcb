"""Synthesis: an LLM implements a block from its neutral spec; the gate judges every answer."""
