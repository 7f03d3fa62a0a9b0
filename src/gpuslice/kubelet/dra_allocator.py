"""The scheduler's structured allocator, as the mock kubelet needs it: pools, selectors, counts, shared counters.

Rules followed (Kubernetes' structured-parameters allocator): slices of the node's pools, newest
generation only, complete pools only; candidates in pool, slice and device order, first complete
solution wins (depth-first with backtracking); a device is free unless another claim holds it
(adminAccess neither takes nor needs a free device); a device that consumes counters fits only
while every counter it uses has enough left after all allocated claims and this claim's picks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuslice.kubelet.dra_cel import CelError, DeviceView, compile_selector, device_view, quantity

MAX_REQUESTS = 32
MAX_COUNT = 128


class UnallocatableClaim(ValueError):
    """A claim that can never be allocated as written (unknown class, bad selector); the message says why."""


@dataclass(frozen=True)
class Candidate:
    driver: str
    pool: str
    name: str
    view: DeviceView
    attributes: Mapping[str, Any]  # fully qualified name -> raw attribute (for matchAttribute)
    consumes: tuple[tuple[str, str, int], ...]  # (counter set, counter, amount)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


@dataclass
class Inventory:
    """The devices a node offers, and the counter sets they draw on."""

    candidates: list[Candidate] = field(default_factory=list)
    counters: dict[tuple[str, str, str, str], int] = field(default_factory=dict)  # (driver, pool, set, counter)
    problems: list[str] = field(default_factory=list)


def _devices(slice_object: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for device in slice_object.get("spec", {}).get("devices") or []:
        basic = device.get("basic")
        found.append({"name": device["name"], **basic} if isinstance(basic, dict) else dict(device))
    return found


def inventory(slices: Iterable[Mapping[str, Any]], node_name: str) -> Inventory:
    """Pools of the node (nodeName or allNodes), newest generation, complete, without duplicate names."""
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for obj in slices:
        spec = obj.get("spec", {})
        if spec.get("nodeName") != node_name and not spec.get("allNodes"):
            continue
        pools.setdefault((spec["driver"], spec["pool"]["name"]), []).append(obj)
    found = Inventory()
    for (driver, pool), members in sorted(pools.items()):
        newest = max(member["spec"]["pool"]["generation"] for member in members)
        current = sorted(
            (m for m in members if m["spec"]["pool"]["generation"] == newest), key=lambda m: m["metadata"]["name"]
        )
        expected = current[0]["spec"]["pool"]["resourceSliceCount"]
        if len(current) != expected:
            found.problems.append(f"pool {driver}/{pool}: {len(current)} of {expected} slices: incomplete, skipped")
            continue
        names: set[str] = set()
        candidates: list[Candidate] = []
        duplicates = []
        for member in current:
            for counter_set in member["spec"].get("sharedCounters") or []:
                for counter, value in counter_set["counters"].items():
                    found.counters[(driver, pool, counter_set["name"], counter)] = quantity(str(value["value"]))
            for device in _devices(member):
                if device["name"] in names:
                    duplicates.append(device["name"])
                names.add(device["name"])
                candidates.append(_candidate(driver, pool, device))
        if duplicates:
            found.problems.append(f"pool {driver}/{pool}: device {duplicates[0]} appears twice: invalid, skipped")
            continue
        found.candidates.extend(candidates)
    return found


def _candidate(driver: str, pool: str, device: Mapping[str, Any]) -> Candidate:
    consumes = tuple(
        (entry["counterSet"], counter, quantity(str(value["value"])))
        for entry in device.get("consumesCounters") or []
        for counter, value in entry["counters"].items()
    )
    attributes = {
        (name if "/" in name else f"{driver}/{name}"): value for name, value in (device.get("attributes") or {}).items()
    }
    return Candidate(driver, pool, device["name"], device_view(driver, device), attributes, consumes)


@dataclass(frozen=True)
class _Request:
    name: str  # as it appears in results: `<request>` or `<request>/<subrequest>`
    base: str
    class_name: str
    selectors: tuple[Any, ...]
    mode: str
    count: int
    admin: bool


def _requests(claim: Mapping[str, Any]) -> list[list[_Request]]:
    """Each request as its alternatives (one for `exactly`, several for `firstAvailable`)."""
    requests = claim.get("spec", {}).get("devices", {}).get("requests") or []
    if len(requests) > MAX_REQUESTS:
        raise UnallocatableClaim(f"{len(requests)} requests; at most {MAX_REQUESTS}")
    out = []
    for request in requests:
        name = request["name"]
        alternatives = [(name, request["exactly"])] if "exactly" in request else []
        alternatives += [(f"{name}/{sub['name']}", sub) for sub in request.get("firstAvailable") or []]
        if not alternatives:
            raise UnallocatableClaim(f"request {name}: needs exactly or firstAvailable")
        options = []
        for full, body in alternatives:
            count = int(body.get("count", 1))
            if not 0 < count <= MAX_COUNT:
                raise UnallocatableClaim(f"request {full}: count must be 1..{MAX_COUNT}")
            selectors = tuple(compile_selector(s["cel"]["expression"]) for s in body.get("selectors") or [])
            options.append(
                _Request(
                    full,
                    name,
                    body["deviceClassName"],
                    selectors,
                    body.get("allocationMode", "ExactCount"),
                    count,
                    bool(body.get("adminAccess")),
                )
            )
        out.append(options)
    return out


def allocate(
    claim: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    allocated: Sequence[Mapping[str, Any]],
    node_name: str,
) -> dict[str, Any] | None:
    """The claim's `status.allocation`, or None when it does not fit now; UnallocatableClaim when it never can."""
    try:
        requests = _requests(claim)
        class_selectors = {}
        for options in requests:
            for option in options:
                if option.class_name not in classes:
                    raise UnallocatableClaim(f"request {option.name}: device class {option.class_name} does not exist")
                class_selectors[option.class_name] = tuple(
                    compile_selector(s["cel"]["expression"])
                    for s in classes[option.class_name].get("spec", {}).get("selectors") or []
                )
    except CelError as exc:
        raise UnallocatableClaim(f"selector: {exc}") from exc
    found = inventory(slices, node_name)
    used: set[tuple[str, str, str]] = set()
    spent: dict[tuple[str, str, str, str], int] = {}
    for other in allocated:
        for result in other.get("devices", {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            key = (result["driver"], result["pool"], result["device"])
            used.add(key)
    by_key = {candidate.key: candidate for candidate in found.candidates}
    for key in used:
        candidate = by_key.get(key)
        for counter_set, counter, amount in candidate.consumes if candidate else ():
            slot = (key[0], key[1], counter_set, counter)
            spent[slot] = spent.get(slot, 0) + amount
    constraints = claim.get("spec", {}).get("devices", {}).get("constraints") or []
    picks: list[tuple[_Request, Candidate]] = []

    def selected(request: _Request, candidate: Candidate) -> bool:
        try:
            return all(
                bool(check(candidate.view)) for check in (*class_selectors[request.class_name], *request.selectors)
            )
        except CelError as exc:
            raise UnallocatableClaim(f"request {request.name}: device {candidate.name}: {exc}") from exc

    def fits(request: _Request, candidate: Candidate) -> bool:
        if not request.admin and (candidate.key in used or any(c.key == candidate.key for _, c in picks)):
            return False
        for counter_set, counter, amount in candidate.consumes:
            slot = (candidate.driver, candidate.pool, counter_set, counter)
            if slot not in found.counters:
                return False
            taken = spent.get(slot, 0) + sum(
                a for r, c in picks if not r.admin for s, n, a in c.consumes if (c.driver, c.pool, s, n) == slot
            )
            if taken + amount > found.counters[slot]:
                return False
        return _constraints_hold(constraints, [*picks, (request, candidate)])

    def solve(position: int) -> bool:
        if position == len(requests):
            return True
        for option in requests[position]:
            matching = [c for c in found.candidates if selected(option, c)]
            if option.mode == "All":
                if not matching or not all(fits(option, c) for c in matching):
                    continue
                picks.extend((option, c) for c in matching)
                if solve(position + 1):
                    return True
                del picks[len(picks) - len(matching) :]
                continue
            if pick(option, matching, option.count, 0, position):
                return True
        return False

    def pick(option: _Request, matching: list[Candidate], left: int, start: int, position: int) -> bool:
        if left == 0:
            return solve(position + 1)
        for index in range(start, len(matching)):
            if fits(option, matching[index]):
                picks.append((option, matching[index]))
                if pick(option, matching, left - 1, index + 1, position):
                    return True
                picks.pop()
        return False

    if not solve(0):
        return None
    return _allocation(claim, classes, picks, node_name)


def _constraints_hold(constraints: Sequence[Mapping[str, Any]], picks: Sequence[tuple[_Request, Candidate]]) -> bool:
    for constraint in constraints:
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        names = set(constraint.get("requests") or [])
        values = [c.attributes.get(attribute) for r, c in picks if not names or r.base in names or r.name in names]
        if any(value is None for value in values) or any(value != values[0] for value in values):
            return False
    return True


def _allocation(
    claim: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    picks: Sequence[tuple[_Request, Candidate]],
    node_name: str,
) -> dict[str, Any]:
    results = []
    for request, candidate in picks:
        result: dict[str, Any] = {
            "request": request.name,
            "driver": candidate.driver,
            "pool": candidate.pool,
            "device": candidate.name,
        }
        if request.admin:
            result["adminAccess"] = True
        results.append(result)
    config: list[dict[str, Any]] = []
    class_requests: dict[str, list[str]] = {}
    for request, _ in picks:
        names = class_requests.setdefault(request.class_name, [])
        if request.name not in names:
            names.append(request.name)
    for class_name, names in class_requests.items():
        for entry in classes[class_name].get("spec", {}).get("config") or []:
            config.append({"source": "FromClass", "requests": names, **entry})
    for entry in claim.get("spec", {}).get("devices", {}).get("config") or []:
        config.append({"source": "FromClaim", **entry})
    return {
        "devices": {"results": results, "config": config},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        },
    }
