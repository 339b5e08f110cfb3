"""TEMPORARY (lead): replaced by the reliability branch's rods_core/ids.py on merge."""

from __future__ import annotations

import os
import re
import time


def new_run_id(name: str) -> str:
    return f"{time.strftime('%Y%m%d_%H%M%S')}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}_{os.urandom(2).hex()}"
