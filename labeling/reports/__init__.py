"""Reports: the numbers and tables leads read on the Monitor page and from the CLI."""
