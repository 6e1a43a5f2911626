"""Every test run keeps the service's files (the secret key file) in a folder of its own, never in the user's
data directory: unless the caller set ``CONTEXTSHIFT_DATA_DIR``, ``XDG_DATA_HOME`` (where a ``Database`` built
without settings keeps its key file) and ``CONTEXTSHIFT_DATA_DIR`` (what ``Settings.from_env`` hands
``create_app`` and the commands) name one temporary folder for the whole session."""

from __future__ import annotations

import os
import tempfile

if not os.environ.get("CONTEXTSHIFT_DATA_DIR"):
    _home = tempfile.mkdtemp(prefix="contextshift-test-data-")
    os.environ["XDG_DATA_HOME"] = _home
    os.environ["CONTEXTSHIFT_DATA_DIR"] = os.path.join(_home, "contextshift")
    import atexit
    import shutil

    atexit.register(shutil.rmtree, _home, True)
