"""URL credentials: how a URL is shown (``redact_url``) and what a message must not contain."""

from __future__ import annotations

import pytest

from agentload.auth import hide_secrets, redact_url, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p@host:8000/v1?token=abc&x=1", "http://u:***@host:8000/v1?token=***&x=1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        (
            "https://h/v1?api_key=K&api-version=2024-02-01",
            "https://h/v1?api_key=***&api-version=2024-02-01",
        ),
        (
            "http://h/v1?access_token=T&SIG=s&Password=p&credential=c",
            "http://h/v1?access_token=***&SIG=***&Password=***&credential=***",
        ),
        ("http://user:pw@[::1]:9/v1", "http://user:***@[::1]:9/v1"),
    ],
)
def test_redact_url_masks_the_password_and_credential_parameters(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_url_secrets_are_hidden_as_written_and_decoded() -> None:
    url = "http://agent:pa%40ss@h/v1?api_key=K3y&api-version=2"
    assert url_secrets(url) == ["pa%40ss", "pa@ss", "K3y"]
    text = "for url 'http://agent:pa%40ss@h/v1?api_key=K3y' (pa@ss)"
    assert hide_secrets(text, url_secrets(url)) == (
        "for url 'http://agent:***@h/v1?api_key=***' (***)"
    )
