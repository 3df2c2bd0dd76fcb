"""Neutral specifications of blocks: what a block is and does, without its code."""

from .model import BlockSpec, json_schema, spec_version

__all__ = ["BlockSpec", "json_schema", "spec_version"]
