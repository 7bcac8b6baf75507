"""Workspaces, memberships, groups, API tokens, namespaces and their ACLs."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
slug_validator = RegexValidator(
    SLUG_PATTERN,
    "Use lowercase letters, digits, '.', '_' or '-', starting with a letter or digit.",
    code="invalid_slug",
)


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    ADMIN = "admin", "Admin"
    OWNER = "owner", "Owner"


ROLE_RANK = {Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


class Permission(models.TextChoices):
    NONE = "none", "None"
    READ = "read", "Read"
    WRITE = "write", "Write"
    OWN = "own", "Own"


PERMISSION_RANK = {Permission.NONE: 0, Permission.READ: 1, Permission.WRITE: 2, Permission.OWN: 3}


class OthersCan(models.TextChoices):
    NONE = "none", "None"
    READ = "read", "Read"
    WRITE = "write", "Write"


class NamespaceKind(models.TextChoices):
    GLOBAL = "global", "Global"
    SYSTEM = "system", "System"
    USER = "user", "User"
    REPO = "repo", "Repository"
    BRANCH = "branch", "Branch"
    TEAM = "team", "Team"


class Visibility(models.TextChoices):
    PUBLIC = "public", "Public"
    PRIVATE = "private", "Private"


class Workspace(models.Model):
    """A tenant: every API request acts inside exactly one workspace."""

    slug = models.CharField(max_length=100, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's role in a workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class Group(models.Model):
    """A named set of workspace members that namespace ACLs can grant to."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=100, validators=[slug_validator])
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="knowledge_groups", blank=True)
    archived = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="group_unique_name")]

    def __str__(self) -> str:
        return self.name


class ApiToken(models.Model):
    """A bearer token bound to (user, workspace). Only its SHA-256 digest is stored."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="knowledge_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a token.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.workspace})"


class Namespace(models.Model):
    """A folder tree of documents with its own access list."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="namespaces")
    slug = models.CharField(max_length=100, validators=[slug_validator])
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=10, choices=NamespaceKind.choices, default=NamespaceKind.GLOBAL)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_namespaces")
    visibility_default = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC)
    others_can = models.CharField(max_length=10, choices=OthersCan.choices, default=OthersCan.NONE)
    metadata = models.JSONField(default=dict, blank=True)
    archived = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "slug"], name="namespace_unique_slug")]
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class NamespaceACL(models.Model):
    """A grant of read/write/own on a namespace to one user or one group."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="acl")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True)
    group = models.ForeignKey(Group, on_delete=models.CASCADE, null=True, blank=True)
    permission = models.CharField(max_length=10, choices=[c for c in Permission.choices if c[0] != Permission.NONE])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "namespace ACL entry"
        verbose_name_plural = "namespace ACL"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="acl_one_subject",
            ),
            models.UniqueConstraint(
                fields=["namespace", "user"], condition=models.Q(user__isnull=False), name="acl_unique_user"
            ),
            models.UniqueConstraint(
                fields=["namespace", "group"], condition=models.Q(group__isnull=False), name="acl_unique_group"
            ),
        ]

    def __str__(self) -> str:
        subject = self.user if self.user_id else self.group
        return f"{subject}: {self.permission}"

    @property
    def subject_type(self) -> str:
        return "user" if self.user_id else "group"


class TeammateConfig(models.Model):
    """How a user acting as an agent keeps memory: its home namespace and memory defaults."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="teammates")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="teammate_configs")
    home_namespace = models.ForeignKey(
        Namespace, on_delete=models.SET_NULL, null=True, blank=True, related_name="teammates"
    )
    memory_path_template = models.CharField(max_length=200, default="memory/{{YYYY-MM-DD}}.md")
    memory_visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE)
    memory_edit_policy = models.CharField(max_length=10, default="owner")
    grants = models.JSONField(default=list, blank=True, help_text="[{namespace: slug, access: read|write}]")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="teammate_unique_user")]

    def __str__(self) -> str:
        return f"teammate {self.user} in {self.workspace}"


class SemanticPolicy(models.Model):
    """A workspace's semantic-search policy and its encrypted provider key (never returned)."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="semantic_policy")
    policy = models.JSONField(default=dict, blank=True)
    api_key_sealed = models.TextField(blank=True, help_text="AES-256-GCM ciphertext bound to the workspace.")
    generation = models.PositiveIntegerField(default=1, help_text="Bumped when provider, model, key or size change.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "semantic search policy"
        verbose_name_plural = "semantic search policies"

    def __str__(self) -> str:
        return f"semantic policy of {self.workspace}"
