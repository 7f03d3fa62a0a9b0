"""Fuzzing the device-reference parser: any text or int gives a DeviceReference or InvalidDeviceReference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.gpu.refs import REPLICA_SEPARATOR, InvalidDeviceReference, parse_device_reference

UUID = "d7ba11ef-6db1-5d54-a28e-f84d79c26838"
PIECES = st.sampled_from(
    ["GPU-", "MIG-", UUID, REPLICA_SEPARATOR, ":", "/", "0", "7", "-1", "99999999999999999999", "\x00", "\n", "é", " "]
)


@given(
    st.one_of(
        st.text(max_size=64),
        st.lists(PIECES, max_size=8).map("".join),
        st.integers(min_value=-(2**70), max_value=2**70),
    )
)
def test_fuzz_device_references(item: str | int) -> None:
    try:
        reference = parse_device_reference(item)
    except InvalidDeviceReference:
        return
    assert reference.text  # a parsed reference keeps the text it came from
