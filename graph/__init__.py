"""The link graph: document nodes, typed edges, link extraction and reference upkeep."""
