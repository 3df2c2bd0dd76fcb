"""Sources: where corpus code comes from (a folder, a git URL, an installed distribution, a PyPI
wheel or an archive), made available on disk and listed, never imported."""
