"""Workspace-specific domain errors."""

from config.exceptions import Conflict, Invalid


class LastWorkspaceOwner(Conflict):
    """The change would leave the workspace without an owner."""

    code = "last_workspace_owner"
    default_message = "This would leave the workspace without an owner; make another member an owner first."


class NotWorkspaceMember(Invalid):
    """A group may only hold members of its own workspace."""

    code = "not_workspace_member"
