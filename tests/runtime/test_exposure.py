"""``serve --host`` beyond loopback says so in one line (the API is plain HTTP)."""

from __future__ import annotations

import pytest

from shapeshift.runtime.preflight import exposure_warning


@pytest.mark.parametrize(
    ("host", "exposed"),
    [
        ("127.0.0.1", False),
        ("::1", False),
        ("localhost", False),
        ("127.0.0.2", False),
        ("0.0.0.0", True),
        ("::", True),
        ("192.0.2.7", True),
    ],
)
def test_serve_warns_in_one_line_when_the_api_binds_beyond_loopback(host, exposed):
    # Checked without listening: tests bind loopback only.
    warning = exposure_warning(host)
    assert (warning is not None) == exposed
    if exposed:
        assert "\n" not in warning and f"--host {host}" in warning
        assert ("every interface" in warning) == (host in ("0.0.0.0", "::"))
