# SPDX-License-Identifier: MIT OR Apache-2.0
"""Log messages reach Python callables and the logging module."""

import logging

import pytest

import tenferro_gpu as tg
import support


def _restore_failure(rt, double):
    """A with_context whose restore fails: logged, not raised."""
    double.inject("cuCtxSetCurrent", 2, support.CUDA_ERROR_UNKNOWN)
    rt.with_context(lambda: None)


def test_a_callback_receives_level_and_message(double, rt):
    got = []
    tg.set_log_callback(lambda level, message: got.append((level, message)))
    _restore_failure(rt, double)
    tg.set_log_callback(None)
    assert len(got) == 1
    level, message = got[0]
    assert level is tg.LogLevel.WARNING
    assert "tf_with_context: failed to restore the caller's CUDA context" in message
    assert "CUDA_ERROR_UNKNOWN (999)" in message


def test_log_to_logging(double, rt, caplog):
    tg.log_to_logging()
    with caplog.at_level(logging.WARNING, logger="tenferro_gpu"):
        _restore_failure(rt, double)
    assert [r.name for r in caplog.records] == ["tenferro_gpu"]
    assert caplog.records[0].levelno == logging.WARNING
    assert "failed to restore" in caplog.records[0].getMessage()


def test_none_restores_the_default_stderr(double, rt, capfd):
    tg.set_log_callback(lambda level, message: None)
    _restore_failure(rt, double)
    assert capfd.readouterr().err == ""
    tg.set_log_callback(None)
    double.set_current(None)
    _restore_failure(rt, double)
    assert capfd.readouterr().err.startswith("tenferro-gpu: tf_with_context: failed to restore")


def test_a_raising_callback_is_reported_and_the_call_still_succeeds(double, rt, capfd):
    def broken(level, message):
        raise RuntimeError("logger is broken")
    tg.set_log_callback(broken)
    _restore_failure(rt, double)
    err = capfd.readouterr().err
    assert "the Python log callback raised" in err
    assert "RuntimeError: logger is broken" in err


def test_teardown_warnings_are_logged(double):
    got = []
    tg.set_log_callback(lambda level, message: got.append(message))
    rt = tg.Runtime(0)
    rt.stream()
    double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
    rt.close()
    tg.set_log_callback(None)
    assert any("leaking" in m and "CUDA_ERROR_UNKNOWN (999)" in m for m in got), got


def test_setting_the_callback_from_inside_a_callback_is_refused(double, rt):
    outcome = []

    def reenter(level, message):
        try:
            tg.set_log_callback(None)
        except tg.RuntimeStateError as e:
            outcome.append(e.operation)
    tg.set_log_callback(reenter)
    _restore_failure(rt, double)
    tg.set_log_callback(None)
    assert outcome == ["tf_set_log_callback"]


def test_a_non_callable_is_refused():
    with pytest.raises(TypeError):
        tg.set_log_callback("stderr")
