"""Recorded usage: a source's own model factories run in the sandbox record how they build and
call its blocks; blocks that fail on guessed arguments are checked again with those recipes."""

PASSED_SUFFIX = ".<passed>"  # a harvest unit named "Class.<passed>" runs a block that passed, as the gate ran it
