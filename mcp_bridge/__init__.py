"""The Knowledge MCP bridge: a separate stdio process that only talks to the REST API."""
