"""The HTTP service: the FastAPI application (``app.create_app``), its routes, middleware and wire shapes."""
