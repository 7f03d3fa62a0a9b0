"""Label prefixes, gpu-feature-discovery's sanitising rule, and Kubernetes label syntax checks."""

from __future__ import annotations

import re
from collections.abc import Mapping

NVIDIA_PREFIX = "nvidia.com/"
GPUSLICE_PREFIX = "gpuslice.io/"
TIMESTAMP_LABEL = "nvidia.com/gfd.timestamp"

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9\-_. ]")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NAME_LENGTH = 63


def sanitise(text: str) -> str:
    """gpu-feature-discovery's rule: drop characters outside [A-Za-z0-9-_. ], join the words with '-'."""
    return "-".join(_NOT_ALLOWED.sub("", text).split())


def short_resource_name(resource: str) -> str:
    """`nvidia.com/gpu.shared` -> `gpu.shared`: the part of a resource name used inside our label keys."""
    return resource.removeprefix(NVIDIA_PREFIX).replace("/", ".")


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid Kubernetes label key, or None when it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"label key {key!r}: prefix {prefix!r} is not a DNS subdomain"
    if len(name) > MAX_NAME_LENGTH:
        return f"label key {key!r}: name part is {len(name)} characters (at most {MAX_NAME_LENGTH})"
    if not _NAME.fullmatch(name):
        return f"label key {key!r}: name part must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_value_problem(key: str, value: str) -> str | None:
    """Why `value` is not a valid Kubernetes label value (empty is valid), or None when it is."""
    if len(value) > MAX_NAME_LENGTH:
        return f"label {key}: value {value!r} is {len(value)} characters (at most {MAX_NAME_LENGTH})"
    if value and not _NAME.fullmatch(value):
        return f"label {key}: value {value!r} must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def validate_labels(labels: Mapping[str, str]) -> list[str]:
    """Every syntax problem in a label set; Kubernetes (and NFD) would refuse such labels."""
    problems = []
    for key in sorted(labels):
        problem = label_key_problem(key) or label_value_problem(key, labels[key])
        if problem is not None:
            problems.append(problem)
    return problems
