"""The JAX settings a child applies after ``import jax`` (sweep.child.jaxsettings)."""

import subprocess
import sys

from sweep.child import jaxsettings
from sweep.wire.childconfig import JAX_CONFIG_VAR, ChildConfig


def test_the_requested_settings_are_parsed_by_name():
    env = {JAX_CONFIG_VAR: "jax_cpu_enable_async_dispatch=false, jax_enable_x64=True,jax_n=3"}
    assert jaxsettings.requested(env) == {
        "jax_cpu_enable_async_dispatch": False,
        "jax_enable_x64": True,
        "jax_n": 3,
    }
    assert jaxsettings.requested({JAX_CONFIG_VAR: ""}) == {} == jaxsettings.requested({})


def _in_a_child(env: dict[str, str], setting: str) -> str:
    """The value of JAX's ``setting`` as a job sees it after ``import jax`` in a child."""
    code = (
        "from sweep.child import isolation; isolation.start()\n"
        f"import jax; print(jax.config.values[{setting!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_one_core_child_runs_jax_computations_inline_once_jax_is_imported():
    """JAX reads no environment variable for async dispatch: the job that imports jax in a
    one-core child sees it off (JAX's default was off up to 0.4.30, on since)."""
    env = ChildConfig().environ([0])
    assert _in_a_child(env, "jax_cpu_enable_async_dispatch") == "False"


def test_the_requested_settings_are_set_at_import_and_unknown_ones_skipped():
    env = ChildConfig().environ([0, 1])  # jax_enable_x64 is False unless set
    env[JAX_CONFIG_VAR] = "jax_no_such_setting=1,jax_enable_x64=true"
    assert _in_a_child(env, "jax_enable_x64") == "True"
