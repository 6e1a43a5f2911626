"""The command line: ``contextshift preview`` (and the service, once it exists)."""
