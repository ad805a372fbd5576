"""One module per CLI command; cli.py registers them."""
