"""The HTTP routes under ``/api/v2``, one module per resource family."""
