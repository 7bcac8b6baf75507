"""Semantic search: providers, chunk indexing with PostgreSQL claims, pgvector storage and queries."""
