"""The child's job loop (sweep/child/serving.py): what a failed job's error says."""

from sweep.child.outputs import normalize_outputs
from sweep.child.serving import _traceback_from_the_job
from sweep.model.job import parse_job


def _raised(call, *args) -> BaseException:
    """What ``call(*args)`` raised, its traceback starting in ``call`` as in the child's loop."""
    try:
        call(*args)
    except Exception as exc:
        assert exc.__traceback__ is not None
        return exc.with_traceback(exc.__traceback__.tb_next)  # this frame: the loop's in the child
    raise AssertionError("it did not raise")


def test_a_job_that_fails_to_import_is_shown_from_its_own_file(tmp_path):
    (tmp_path / "broken.py").write_text("import no_such_module_here\n\ndef run(x):\n    return {}\n")
    error = _traceback_from_the_job(_raised(parse_job(f"{tmp_path / 'broken.py'}:run").load))
    frames = [line for line in error.splitlines() if line.startswith("  File ")]
    assert frames[0].startswith(f'  File "{tmp_path / "broken.py"}", line 1'), error
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in error


def test_an_error_sweep_raises_about_what_a_job_returned_keeps_its_frame():
    error = _traceback_from_the_job(_raised(normalize_outputs, object()))
    frames = [line for line in error.splitlines() if line.startswith("  File ")]
    assert len(frames) == 1 and "sweep/child/outputs.py" in frames[0], error
    assert "TypeError: output 'result' has unsupported type object" in error
