"""Listeners: notify calls every added callback, remove takes one out (twice is harmless), callbacks may call back."""

from __future__ import annotations

from gpuslice.sharing.listeners import Listeners


def test_add_notify_remove() -> None:
    listeners = Listeners()
    calls: list[str] = []
    remove_a = listeners.add(lambda: calls.append("a"))
    listeners.add(lambda: calls.append("b"))
    listeners.notify()
    remove_a()
    remove_a()
    listeners.notify()
    assert calls == ["a", "b", "b"]


def test_a_callback_may_add_a_listener_without_deadlock() -> None:
    listeners = Listeners()
    calls: list[str] = []
    listeners.add(lambda: (calls.append("outer"), listeners.add(lambda: calls.append("inner"))))
    listeners.notify()  # runs outside the lock: the add inside does not block, and is not called this round
    assert calls == ["outer"]
