"""This user's signing key is refused, as ssh refuses a private key, when others can read or
change it, when its folder lets others replace it, or when it holds no key: one line naming
the file and the command that fixes it, whether the key is needed to sign (every new run) or
to check a signature (``resume=``, ``trainer-eval``, ``load_model``); a refused key signs
nothing (the commands, which write nothing: tests/command/test_damaged_key.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from trainer_run.runs import signing_key, trust


@pytest.fixture
def key(tmp_path, monkeypatch) -> Path:
    """This user's key (made, as a first run makes it) under a config home of the test's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert trust.sign(b"first") is not None
    path = tmp_path / "config" / "trainer-run" / "key"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    return path


def _refusal(call) -> str:
    with pytest.raises(signing_key.KeyRefused) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message
    return message


def _both_refuse(data=b"data") -> str:
    """The message of a refused key, which signing and checking a signature give alike."""
    message = _refusal(lambda: trust.sign(data))
    assert _refusal(lambda: trust.signed_by_me(data, "hmac-sha256:00")) == message
    return message


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606, 0o666, 0o610, 0o601])
def test_a_key_others_can_read_or_change_is_refused_naming_its_mode_and_chmod(key, mode):
    signed = trust.sign(b"data")
    before = key.read_bytes()
    key.chmod(mode)
    assert _both_refuse() == (f"your trainer-run key {key} has mode {mode:04o}: others can read or "
                              "change it, so it is not used (ssh refuses such a key too); run: "
                              f"chmod 600 {shlex.quote(str(key))}")
    assert key.read_bytes() == before
    key.chmod(0o600)  # the fix the line gives: the same key signs again
    assert trust.sign(b"data") == signed


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o730, 0o703, 0o720])
def test_a_key_folder_others_can_write_is_refused_naming_its_mode_and_chmod(key, mode):
    signed = trust.sign(b"data")
    key.parent.chmod(mode)
    assert _both_refuse() == (f"the folder of your trainer-run key, {key.parent}, has mode "
                              f"{mode:04o}: others can replace the key in it, so it is not used; "
                              f"run: chmod 700 {shlex.quote(str(key.parent))}")
    key.parent.chmod(0o700)
    assert trust.sign(b"data") == signed


@pytest.mark.parametrize("mode", [0o700, 0o750, 0o755, 0o711, 0o500])
def test_a_key_folder_others_may_only_read_is_used(key, mode):
    signed = trust.sign(b"data")
    key.parent.chmod(mode)
    try:
        assert trust.sign(b"data") == signed and trust.signed_by_me(b"data", signed)
    finally:
        key.parent.chmod(0o700)


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_a_key_only_its_owner_can_use_is_used(key, mode):
    signed = trust.sign(b"data")
    key.chmod(mode)
    assert trust.sign(b"data") == signed and trust.signed_by_me(b"data", signed)


GARBAGE = [b"garbage\n", b"", b"\n", b"ab" * 31 + b"\n", b"ab" * 33 + b"\n", b"zz" * 32 + b"\n",
           b"\xff\xfe" * 32, b"ab" * 32 + b"x\n"]


@pytest.mark.parametrize("content", GARBAGE)
def test_a_key_file_that_holds_no_key_is_refused_saying_how_to_make_a_new_one(key, content):
    key.write_bytes(content)
    message = _both_refuse()
    remake = (f"delete it (rm {shlex.quote(str(key))}) and the next run makes a new key; runs "
              "signed with the old one then load only with trust=true")
    assert message in (f"{key} holds no trainer-run key (64 hex digits), so nothing can be signed "
                       f"or checked with it; {remake}",
                       f"cannot read your trainer-run key {key} (it is not text); {remake}")
    assert key.read_bytes() == content


def test_a_key_that_is_a_folder_is_refused(key):
    key.unlink()
    key.mkdir(mode=0o700)
    message = _both_refuse()
    assert message.startswith(f"cannot read your trainer-run key {key} (") and "rm " in message


def test_deleting_a_refused_key_makes_a_new_one_and_runs_signed_with_the_old_need_trust(key):
    old = trust.sign(b"run")
    key.write_text("garbage\n")
    _both_refuse()
    key.unlink()
    new = trust.sign(b"run")
    assert new is not None and new != old
    assert not trust.signed_by_me(b"run", old) and trust.signed_by_me(b"run", new)


def test_a_key_with_a_path_that_needs_quoting_is_named_so_the_command_pastes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "my config"))
    trust.sign(b"x")
    path = tmp_path / "my config" / "trainer-run" / "key"
    path.chmod(0o644)
    assert _refusal(lambda: trust.sign(b"x")).endswith(f"run: chmod 600 '{path}'")
