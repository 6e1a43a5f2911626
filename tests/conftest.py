"""Every test run keeps the service's files (the secret key file) in a folder of its own, never in the user's
data directory: ``CONTEXTSHIFT_DATA_DIR`` is set for the whole session unless the caller set it."""

from __future__ import annotations

import os
import tempfile

if not os.environ.get("CONTEXTSHIFT_DATA_DIR"):
    os.environ["CONTEXTSHIFT_DATA_DIR"] = tempfile.mkdtemp(prefix="contextshift-test-data-")
    import atexit
    import shutil

    atexit.register(shutil.rmtree, os.environ["CONTEXTSHIFT_DATA_DIR"], True)
