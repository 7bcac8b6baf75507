from mcp_bridge.cli import main

main()
