"""Without the Java helpers (a JVM where Janino cannot compile them): one warning, no action
captured, and nothing ever raised into the job."""

from __future__ import annotations

import logging

import pytest

from emitter.capture import Capture
from emitter.dedupe import WrapperDedupe
from emitter.listener import janino
from emitter.listener.batch import BatchListener


class _JvmWithoutJanino:
    """A py4j JVM view with no `org.codehaus.janino` package: every lookup in it fails as py4j's does."""

    def __getattr__(self, name: str) -> object:
        raise AttributeError(f"no Java package or class {name}")


class _Gateway:
    def __init__(self) -> None:
        self.jvm = _JvmWithoutJanino()


# alive for the whole test session: `janino` keeps what it found per gateway by `id`, which a
# later real gateway must not inherit
_GATEWAY = _Gateway()


class _Sink:
    closed = False

    def __init__(self) -> None:
        self.actions: list[Capture] = []

    def handle_actions(self, actions: list[Capture]) -> None:
        self.actions.extend(actions)


def test_without_janino_actions_are_not_captured_and_the_reason_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    gateway, sink = _GATEWAY, _Sink()
    with caplog.at_level(logging.WARNING, logger="emitter.listener"):
        listener = BatchListener(gateway, WrapperDedupe(), sink)
        BatchListener(gateway, WrapperDedupe(), sink)  # a second session of the same JVM
        listener.onSuccess("command", object(), 1)
        listener.onFailure("command", object(), object())
    assert sink.actions == [] and listener.extraction_ms == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "could not be compiled" in warnings[0], warnings
    with pytest.raises(janino.HelperUnavailable):
        janino.class_loader(gateway)


def test_a_closed_listener_removes_the_temp_file_a_described_callback_names(tmp_path) -> None:
    """The JVM writes a long description to a temp file before it calls the listener; a listener
    whose attachment has closed drops the call, and the file with it."""
    sink = _Sink()
    sink.closed = True
    listener = BatchListener(_GATEWAY, WrapperDedupe(), sink)
    description = tmp_path / "spark-lineage-1.txt"
    description.write_text('{"root":"InsertIntoHadoopFsRelationCommand","id":3}')
    listener.onSuccess(f"command\x00120000\x00@{description}", object(), 1)
    assert not description.exists() and sink.actions == []


def test_a_callback_that_fails_is_logged_by_its_name_without_its_description(caplog: pytest.LogCaptureFixture) -> None:
    """The description the JVM hands over holds the plan (literal values of the query): a failure
    to capture names the action only."""
    listener = BatchListener(_GATEWAY, WrapperDedupe(), _Sink())
    with caplog.at_level(logging.WARNING, logger="emitter.listener"):
        listener.onSuccess('command\x00not-a-number\x00{"plan": "WHERE card = \'4111\'"}', object(), 1)
    messages = [record.getMessage() for record in caplog.records]
    assert any("'command' not captured" in message for message in messages), messages
    assert not any("4111" in message for message in messages), messages
