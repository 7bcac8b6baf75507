"""Knowledge-specific domain errors."""

from config.exceptions import Conflict


class VersionConflict(Conflict):
    code = "version_conflict"


class PathTaken(Conflict):
    code = "path_taken"


class DocumentArchived(Conflict):
    code = "document_archived"


class ArchiveStateConflict(Conflict):
    code = "archive_state_conflict"
