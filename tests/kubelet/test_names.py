"""The kubelet's extended-resource-name rule and Go-style quoting, as pure functions."""

from __future__ import annotations

import pytest

from gpuslice.kubelet.gotext import go_quote, go_quote_list
from gpuslice.kubelet.names import is_extended_resource_name

VALID = [
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.10gb.me",
    "nvidia.com/mig-1g.10gb",
    "example.com/a",
    "a/b",
    "example.com/" + "x" * 63,
    "d" * 244 + "/gpu",
    "my-domain.io/Some_Name.v1",
]
INVALID = [
    "gpu",  # no domain: a native resource
    "kubernetes.io/gpu",
    "foo.kubernetes.io/x",
    "nvidia.com/-gpu",
    "nvidia.com/gpu-",
    "requests.nvidia.com/gpu",
    "Nvidia.com/gpu",  # the domain must be lowercase
    "nvidia.com/",
    "/gpu",
    "nvidia.com/gpu/extra",
    "example.com/" + "x" * 64,
    "d" * 245 + "/gpu",  # "requests." + domain would pass 253
    "nvidia.com/gp u",
    "nvidia..com/gpu",
    "",
]


@pytest.mark.parametrize("name", VALID)
def test_valid_extended_resource_names(name: str) -> None:
    assert is_extended_resource_name(name)


@pytest.mark.parametrize("name", INVALID)
def test_invalid_extended_resource_names(name: str) -> None:
    assert not is_extended_resource_name(name)


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("v1alpha", '"v1alpha"'),
        ("", '""'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("tab\there\n", '"tab\\there\\n"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("gpü", '"gpü"'),
        ("\u200b", '"\\u200b"'),
    ],
)
def test_go_quote_matches_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


def test_go_quote_list_is_space_separated() -> None:
    assert go_quote_list(["v1beta1"]) == '["v1beta1"]'
    assert go_quote_list(["a", "b"]) == '["a" "b"]'
