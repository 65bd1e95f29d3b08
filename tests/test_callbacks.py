"""Callbacks around the stages of one update (trainer_run.callbacks), traced by hand: a callable or a
list fired in order, no hooks by default, an unknown hook or a non-callable refused."""

from __future__ import annotations

import pytest

from trainer_run.callbacks import HOOKS, Callbacks


def test_callbacks_accept_a_callable_or_a_list_and_fire_in_order():
    calls = []

    def named(tag):
        return lambda i: calls.append((tag, i))

    first, second, third = named("a"), named("b"), named("c")
    callbacks = Callbacks({"forward_on_start": first, "update_on_finish": [second, third],
                           "comm_on_start": None})
    assert callbacks["forward_on_start"] == [first]
    assert callbacks["update_on_finish"] == [second, third]
    assert callbacks["comm_on_start"] == []
    callbacks.fire("update_on_finish", 7)
    callbacks.fire("forward_on_start", 3)
    callbacks.fire("backward_on_start", 3)  # no callables: nothing happens
    assert calls == [("b", 7), ("c", 7), ("a", 3)]
    callbacks.add("update_on_finish", first)
    calls.clear()
    callbacks.fire("update_on_finish", 8)
    assert calls == [("b", 8), ("c", 8), ("a", 8)]


def test_callbacks_default_to_no_hooks():
    callbacks = Callbacks()
    for hook in HOOKS:
        assert callbacks[hook] == []
        callbacks.fire(hook, 0)
    assert len(HOOKS) == 8


def test_unknown_hook_raises_key_error_listing_the_hooks():
    with pytest.raises(KeyError) as info:
        Callbacks({"forward_on_begin": print})
    message = str(info.value)
    assert "forward_on_begin" in message
    assert all(hook in message for hook in HOOKS)
    with pytest.raises(KeyError) as info:
        Callbacks().add("after_update", print)
    assert "after_update" in str(info.value) and all(hook in str(info.value) for hook in HOOKS)
    with pytest.raises(KeyError):
        Callbacks().fire("after_update", 0)


@pytest.mark.parametrize("value", [42, [print, 42], "not a function"])
def test_non_callable_raises_type_error(value):
    with pytest.raises(TypeError):
        Callbacks({"update_on_start": value})


def test_add_refuses_a_non_callable():
    callbacks = Callbacks()
    with pytest.raises(TypeError, match="callback for update_on_start must be callable"):
        callbacks.add("update_on_start", 42)
    assert callbacks["update_on_start"] == []
