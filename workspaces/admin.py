"""Admin registrations for workspaces (refined for namespace owners in workspaces/admin_site)."""
