"""The bridge is a separate program: it must never import Django or the apps."""

from __future__ import annotations

import subprocess
import sys


def test_bridge_imports_no_django_or_apps():
    code = (
        "import sys, mcp_bridge.server, mcp_bridge.cli;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'config', 'workspaces', 'knowledge', 'graph', 'transfer')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
