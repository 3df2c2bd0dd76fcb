"""Neutral specifications of blocks: what a block is and does, without its code."""

from .model import SPEC_VERSION, BlockSpec, json_schema

__all__ = ["SPEC_VERSION", "BlockSpec", "json_schema"]
