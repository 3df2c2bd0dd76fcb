"""The index: every Python file of the sources parsed into SQLite, and the blocks discovered in it
(non-abstract ``nn.Module`` subclasses with a ``forward``)."""
