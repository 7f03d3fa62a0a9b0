"""What a Kubernetes API request can fail with: one error type, subclasses for the cases callers handle."""

from __future__ import annotations


class KubeError(Exception):
    """The API server refused, could not be reached, or answered beyond a limit; `status` is the HTTP status
    when there was one, `kind` a short code for counters and logs."""

    kind = "error"

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class NoConfig(KubeError):
    """Neither an in-cluster service account nor a kubeconfig: there is no API server to talk to."""

    kind = "no_config"


class NotFound(KubeError):
    """404: the object does not exist (an answer, not a fault)."""

    kind = "not_found"


class Gone(KubeError):
    """410 Gone, as an answer or as an ERROR event in a watch: the resource version is too old; list again."""

    kind = "gone"


class DeadlineExceeded(KubeError):
    """The request's total deadline passed (a slow, silent or trickling server)."""

    kind = "deadline"


class TooLarge(KubeError):
    """A response body or a watch line exceeded its cap; nothing of it was decoded."""

    kind = "too_large"


class TooManyPages(KubeError):
    """A list kept answering `metadata.continue` past the page cap."""

    kind = "too_many_pages"


class Malformed(KubeError):
    """An answer that is not the JSON the API promises (not an object, no `metadata`, an unknown shape)."""

    kind = "malformed"


class Stopped(KubeError):
    """The client was closed (the process is stopping)."""

    kind = "stopped"
