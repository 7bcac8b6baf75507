"""Transfer-specific domain errors (409 = the destination is not what the import assumed)."""

from config.exceptions import Conflict, TooLarge


class NamespaceExists(Conflict):
    code = "namespace_exists"
    default_message = "The destination namespace already exists; an unrelated namespace is never merged or overwritten."


class ImportExists(Conflict):
    code = "import_exists"
    default_message = "This import already exists; use --resume to continue it."


class ImportPlanChanged(Conflict):
    code = "import_plan_changed"
    default_message = "The import plan changed; a modified bundle needs a new destination namespace."


class ImportedDocumentChanged(Conflict):
    code = "imported_document_changed"
    default_message = "The imported document was changed (renamed, edited or archived); it is not re-created."


class DestinationChanged(Conflict):
    code = "import_destination_changed"
    default_message = "The destination namespace was changed since the import began (owner, sharing or name)."


class TransferLimit(TooLarge):
    code = "transfer_limit"
    default_message = "Import exceeds namespace transfer limits."
