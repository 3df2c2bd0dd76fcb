"""Recorded usage: a source's own model factories run in the sandbox record how they build and
call its blocks; blocks that fail on guessed arguments are checked again with those recipes."""
