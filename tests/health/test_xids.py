"""DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS with NVIDIA's semantics, quirks included."""

from __future__ import annotations

import pytest

from gpuslice.discovery.xid import DEFAULT_IGNORED_XIDS
from gpuslice.health import XidPolicy, parse_xid_list, xid_policy_from_env

DEFAULTS = set(DEFAULT_IGNORED_XIDS)

# (DP_DISABLE_HEALTHCHECKS, DP_ENABLE_HEALTHCHECKS, checks enabled, ignored Xids)
CASES = [
    ("", "", True, DEFAULTS),
    ("94", "", True, DEFAULTS | {94}),
    ("94, 48 ,79", "", True, DEFAULTS | {94, 48, 79}),
    ("all", "", False, DEFAULTS),
    ("ALL", "", False, DEFAULTS),
    (" Xids ", "", False, DEFAULTS),
    ("94,xids", "", False, DEFAULTS | {94}),
    ("0", "", False, DEFAULTS),  # quirk: 0 is NVIDIA's internal "all" marker
    ("", "13", True, DEFAULTS - {13}),
    ("", "13,109", True, DEFAULTS - {13, 109}),
    ("94", "94", True, DEFAULTS),  # the enable list wins over the disable list
    ("", "all", True, set()),  # every Xid re-enabled, the built-in ones too
    ("94", "all", True, set()),
    ("all", "79", False, DEFAULTS),  # quirk: disable=all wins over numbered enables
    ("all", "all", True, set()),
    ("", "0", True, set()),  # quirk: 0 in the enable list means all as well
    ("-1,abc,0x1f,1.5,+5", "", True, DEFAULTS),  # malformed entries dropped
    (",, ,", ",", True, DEFAULTS),
]


@pytest.mark.parametrize(("disable", "enable", "enabled", "ignored"), CASES)
def test_env_table(disable: str, enable: str, enabled: bool, ignored: set[int]) -> None:
    policy = xid_policy_from_env({"DP_DISABLE_HEALTHCHECKS": disable, "DP_ENABLE_HEALTHCHECKS": enable})
    assert policy.checks_enabled is enabled
    assert set(policy.ignored) == ignored


def test_unset_variables_are_the_defaults() -> None:
    assert xid_policy_from_env({}) == XidPolicy()
    assert XidPolicy().ignored == DEFAULT_IGNORED_XIDS


def test_malformed_entries_are_noted_with_the_variable() -> None:
    policy = xid_policy_from_env({"DP_DISABLE_HEALTHCHECKS": "94,-1", "DP_ENABLE_HEALTHCHECKS": "x"})
    assert policy.notes == (
        "DP_DISABLE_HEALTHCHECKS: ignoring '-1': not a non-negative Xid number",
        "DP_ENABLE_HEALTHCHECKS: ignoring 'x': not a non-negative Xid number",
    )


@pytest.mark.parametrize(
    ("xid", "critical"),
    [(79, True), (48, True), (94, True), (13, False), (31, False), (43, False), (45, False), (68, False), (109, False)],
)
def test_default_critical_decision(xid: int, critical: bool) -> None:
    assert XidPolicy().is_critical(xid) is critical


def test_xid_zero_is_a_failed_check_and_always_critical() -> None:
    policy = xid_policy_from_env({"DP_ENABLE_HEALTHCHECKS": "all"})
    assert policy.is_critical(0)
    assert XidPolicy().is_critical(0)


def test_disabled_checks_make_nothing_critical() -> None:
    policy = xid_policy_from_env({"DP_DISABLE_HEALTHCHECKS": "all"})
    assert not policy.is_critical(79)
    assert not policy.is_critical(0)
    assert "disabled" in policy.describe()


def test_parse_list_is_case_insensitive_and_trims() -> None:
    assert parse_xid_list(" 94 ,ALL, Xids", "V") == ({94, 0}, [])
