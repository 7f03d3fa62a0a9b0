"""Which Xids make a GPU unhealthy: NVIDIA's defaults and its DP_DISABLE/DP_ENABLE_HEALTHCHECKS variables."""

from __future__ import annotations

from collections.abc import Mapping

from gpuslice.discovery.xid import DEFAULT_IGNORED_XIDS
from gpuslice.records import record

DISABLE_ENV = "DP_DISABLE_HEALTHCHECKS"
ENABLE_ENV = "DP_ENABLE_HEALTHCHECKS"

# NVIDIA keeps "every Xid" as the number 0 inside its Xid set, so an entry `0` means the same as `all`.
ALL_XIDS_MARKER = 0
_ALL_WORDS = ("all", "xids")


@record
class XidPolicy:
    """The effective Xid rules of one plugin process.

    checks_enabled: False when health checking is off entirely (nothing is ever marked unhealthy).
    ignored: Xids that are skipped; every other Xid is critical. notes: one line per entry that was
    malformed and therefore dropped (NVIDIA logs and drops them too).
    """

    checks_enabled: bool = True
    ignored: frozenset[int] = DEFAULT_IGNORED_XIDS
    notes: tuple[str, ...] = ()

    def is_critical(self, xid: int) -> bool:
        """True when this Xid marks its device unhealthy.

        Xid 0 is not an Xid but a failed health check (event registration, a failed wait, an unknown
        device): it is always critical while checks are enabled, because it cannot be ignored by number.
        """
        if not self.checks_enabled:
            return False
        return xid == ALL_XIDS_MARKER or xid not in self.ignored

    def describe(self) -> str:
        if not self.checks_enabled:
            return f"health checks disabled ({DISABLE_ENV})"
        return "ignored Xids: " + (", ".join(str(x) for x in sorted(self.ignored)) or "none")


def parse_xid_list(value: str, variable: str) -> tuple[set[int], list[str]]:
    """The entries of one variable: numbers, with `all`/`xids` (and `0`) as ALL_XIDS_MARKER.

    Comma-separated, case-insensitive, whitespace trimmed; empty entries are skipped silently,
    malformed or negative ones are dropped with a note naming the variable and the entry.
    """
    xids: set[int] = set()
    notes: list[str] = []
    for raw in value.lower().split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry in _ALL_WORDS:
            xids.add(ALL_XIDS_MARKER)
            continue
        # Go's strconv.ParseUint: ASCII digits only, so "-1", "+5", "0x1f" and "1.5" are all refused.
        if not entry.isascii() or not entry.isdigit():
            notes.append(f"{variable}: ignoring {raw.strip()!r}: not a non-negative Xid number")
            continue
        xids.add(int(entry))
    return xids, notes


def xid_policy_from_env(environ: Mapping[str, str]) -> XidPolicy:
    """NVIDIA's rules (device plugin v0.18+), quirks included; see docs/health.md.

    ignored = (defaults | disabled) - enabled, where an `all` in DP_ENABLE_HEALTHCHECKS empties the
    set (defaults too). Health checks are off when the result still holds the "all" marker, so
    `DP_DISABLE_HEALTHCHECKS=all` wins over any numbered DP_ENABLE_HEALTHCHECKS entry, and an entry `0`
    in the disable list switches everything off as `all` does.
    """
    disabled, disable_notes = parse_xid_list(environ.get(DISABLE_ENV, ""), DISABLE_ENV)
    enabled, enable_notes = parse_xid_list(environ.get(ENABLE_ENV, ""), ENABLE_ENV)
    ignored = set(DEFAULT_IGNORED_XIDS) | disabled
    if ALL_XIDS_MARKER in enabled:
        ignored.clear()
    else:
        ignored -= enabled
    notes = tuple(disable_notes + enable_notes)
    if ALL_XIDS_MARKER in ignored:
        return XidPolicy(checks_enabled=False, ignored=frozenset(ignored - {ALL_XIDS_MARKER}), notes=notes)
    return XidPolicy(checks_enabled=True, ignored=frozenset(ignored), notes=notes)
