"""Where the bridge and the `agor` CLI find their deployment: env first, then the credentials file.

Shared by both so that `agor login` once is enough for agents too. Never imports Django.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AgorConfig:
    url: str
    token: str
    source: str  # "environment", the credentials file path, or "missing"

    @property
    def is_complete(self) -> bool:
        return bool(self.url and self.token)


def config_dir() -> Path:
    if os.environ.get("AGOR_CONFIG_DIR"):
        return Path(os.environ["AGOR_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agor"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


def load_config() -> AgorConfig:
    """AGOR_URL / AGOR_TOKEN override the credentials file written by `agor login`."""
    stored: dict[str, str] = {}
    path = credentials_path()
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                stored = {k: str(v) for k, v in data.items() if k in ("url", "token") and v}
        except (OSError, ValueError):
            stored = {}
    url = os.environ.get("AGOR_URL") or stored.get("url", "")
    token = os.environ.get("AGOR_TOKEN") or stored.get("token", "")
    if os.environ.get("AGOR_URL") or os.environ.get("AGOR_TOKEN"):
        source = "environment"
    elif stored:
        source = str(path)
    else:
        source = "missing"
    return AgorConfig(url=url.rstrip("/"), token=token, source=source)


def save_credentials(url: str, token: str) -> Path:
    """Write URL + token readable only by the user (0600), atomically."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url.rstrip("/"), "token": token}, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def forget_credentials() -> bool:
    path = credentials_path()
    if path.exists():
        path.unlink()
        return True
    return False
