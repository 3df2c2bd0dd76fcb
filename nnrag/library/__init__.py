"""The block library: every discovered block's standalone file with the gate's verdict on it."""
