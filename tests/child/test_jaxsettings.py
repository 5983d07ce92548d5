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


def test_a_one_core_child_runs_jax_computations_inline_once_jax_is_imported():
    """JAX reads no environment variable for async dispatch: in a real child, the job that
    imports jax sees it off at k = 1 and on at k = 2, and an unknown name is skipped."""
    code = (
        "import os, sys; from sweep.child import isolation; isolation.start()\n"
        "import jax; print(jax.config.values['jax_cpu_enable_async_dispatch'])"
    )
    seen = []
    for cores, extra in (([0], ",jax_no_such_setting=1"), ([0, 1], "")):
        env = ChildConfig().environ(cores)
        if extra:
            env[JAX_CONFIG_VAR] += extra
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        seen.append(out.stdout.strip())
    assert seen == ["False", "True"]
