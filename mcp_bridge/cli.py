"""`agor-mcp` / `python -m mcp_bridge`: the Knowledge MCP server on stdio."""

from __future__ import annotations

import logging
import sys

from mcp_bridge.config import load_config
from mcp_bridge.server import build_server


def main() -> None:
    # stdout belongs to the protocol; everything else goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="agor-mcp: %(message)s")
    config = load_config()
    server = build_server(config)
    problem = server.bridge.check()  # type: ignore[attr-defined]
    if problem:
        logging.getLogger("mcp_bridge").error(problem)
    server.run("stdio")


if __name__ == "__main__":
    main()
