"""Name-derived UUIDs are uuid.uuid5's, for any namespace and name."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.gpu import name_uuid


@given(st.uuids(), st.text())
def test_a_name_uuid_is_uuid5_s(namespace: uuid.UUID, name: str) -> None:
    assert name_uuid(namespace, name) == uuid.uuid5(namespace, name)


def test_a_known_value() -> None:  # RFC 4122 appendix's example namespace and a fixed name
    assert str(name_uuid(uuid.NAMESPACE_DNS, "python.org")) == "886313e1-3b8a-5372-9b90-0c9aee199e5d"
