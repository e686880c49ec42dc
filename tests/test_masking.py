"""The secrets policy (``agentload.masking``): what is secret is decided by where a value sits
(userinfo, query, credential header, environment), not by the shape of a vendor's key, and it
is masked at the sinks: every line printed and every trace record written."""

from __future__ import annotations

import io

import pytest

from agentload.auth import api_key_from_env
from agentload.errors import ConfigError
from agentload.masking import (
    MaskedStream,
    hide_secrets,
    is_secret_header,
    mask_text,
    redact_url,
    remember,
    remember_url,
    scrub_bytes,
    url_secrets,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p@host:8000/v1?token=abc&x=1", "http://***@host:8000/v1?token=***&x=***"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        (
            "https://h/v1?api_key=K&api-version=2024-02-01",
            "https://h/v1?api_key=***&api-version=2024-02-01",
        ),
        (
            "http://h/v1?access_token=T&SIG=s&Password=p&credential=c",
            "http://h/v1?access_token=***&SIG=***&Password=***&credential=***",
        ),
        ("http://user:pw@[::1]:9/v1", "http://***@[::1]:9/v1"),
        # a password holding "#" or "?", or a userinfo ended by one: no parser sees them
        ("http://u:pa55#word@h:9/v1", "http://***@h:9/v1"),
        ("http://u:pa55?word@h/v1", "http://***@h/v1"),
        ("http://hunter2?@h/v1", "http://***@h/v1"),
        ("http://h:9?to=me@example.com", "http://h:9?to=***"),  # a query, not a password
        # a Git token is the whole userinfo, or its user part
        ("https://ghp_0123456789abcdef@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("https://TOKEN:x-oauth-basic@h/r", "https://***@h/r"),
        # a URL that does not parse is masked all the same
        # a password holding "/" makes a URL that does not parse: it is masked all the same
        ("http://u:pass/word@h/v1?k=1", "http://***@h/v1?k=***"),
        ("http://h/v1/@scope/pkg", "http://h/v1/@scope/pkg"),
        ("http://u:s3cr3t@[bad/v1?q=1", "http://***@[bad/v1?q=***"),
    ],
)
def test_redact_url_masks_userinfo_and_every_query_value_but_plain_ones(
    url: str, shown: str
) -> None:
    assert redact_url(url) == shown


def test_url_secrets_are_hidden_as_written_and_decoded() -> None:
    url = "http://agent:pa%40ss123@h/v1?api_key=K3y0000000&api-version=2"
    assert url_secrets(url) == [
        "agent:pa%40ss123",
        "agent:pa@ss123",
        "K3y0000000",
        "pa%40ss123",
        "pa@ss123",
    ]
    text = "for url 'http://agent:pa%40ss123@h/v1?api_key=K3y0000000' (pa@ss123)"
    assert hide_secrets(text, url_secrets(url)) == "for url 'http://***@h/v1?api_key=***' (***)"


def test_a_remembered_secret_is_masked_in_any_message_and_record() -> None:
    remember_url("http://127.0.0.1:9/x.git?token=QTOK12345678")
    git = "fatal: unable to access 'http://127.0.0.1:9/x.git?token=QTOK12345678/': refused"
    assert "QTOK12345678" not in mask_text(git)
    assert "QTOK12345678" not in mask_text("HTTPConnectionPool: url: /x.git?token=QTOK12345678")
    remember("Bearer gsk_notAnSkKey_0123")
    body = b'{"error":{"message":"Incorrect API key provided: gsk_notAnSkKey_0123"}}'
    assert b"gsk_notAnSkKey_0123" not in scrub_bytes(body)
    assert b"[REDACTED]" in scrub_bytes(body)


def test_short_values_are_not_masked_everywhere() -> None:
    # 'EMPTY' and 'dummy' are the usual keys of local servers: masking them would eat words
    remember("dummy", "EMPTY")
    assert mask_text("a dummy EMPTY file") == "a dummy EMPTY file"


def test_traces_mask_credentials_by_structure() -> None:
    raw = b'{"recipe":"git:https://gituser:GITPW@h/x.git?token=QT&page=2","u":"https://A@b/c"}'
    out = scrub_bytes(raw)
    assert b"GITPW" not in out and b"gituser" not in out and b"QT&" not in out
    assert b"page=2" in out  # a plain query value in content is left
    assert b"https://[REDACTED]@b/c" in out
    # what the display already masked stays as it is
    shown = b'{"endpoint":"https://***@h/v1?api_key=***"}'
    assert scrub_bytes(shown) == shown


@pytest.mark.parametrize("name", ["Authorization", "x-api-key", "api-key", "Cookie",
                                  "x-goog-api-key", "X-Auth-Token", "proxy-authorization"])  # fmt: skip
def test_credential_headers(name: str) -> None:
    assert is_secret_header(name) and is_secret_header(name.encode())


@pytest.mark.parametrize("name", ["x-session-id", "x-agent-name", "content-type", "user-agent"])
def test_plain_headers(name: str) -> None:
    assert not is_secret_header(name)


def test_a_masked_stream_masks_a_secret_split_over_writes() -> None:
    remember("zq_split_secret_0042")
    inner = io.StringIO()
    stream = MaskedStream(inner)
    stream.write("key zq_split_")
    stream.write("secret_0042 and http://T0KEN@h/v1\n")
    stream.write("tail zq_split_secret_0042")
    stream.flush()
    assert inner.getvalue() == "key *** and http://***@h/v1\ntail ***"


@pytest.mark.parametrize(("value", "why"), [("sk-abc\ndef", "U+000A at position 7"),
                                            ("kéy-0123", "U+00E9 at position 2"),
                                            ("sk abc", "a space at position 3")])  # fmt: skip
def test_an_api_key_a_header_cannot_carry_is_one_line_that_never_shows_it(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    monkeypatch.setenv("AGENTLOAD_API_KEY", value)
    with pytest.raises(ConfigError) as err:
        api_key_from_env()
    assert why in str(err.value) and "AGENTLOAD_API_KEY" in str(err.value)
    assert value not in str(err.value)


def test_a_query_quoted_without_its_url_is_masked() -> None:
    """urllib3 quotes ``url: /v1/traces?token=abc``: a value of any length is masked there, and
    the punctuation after it kept."""
    line = "Max retries exceeded with url: /v1/traces?token=ab1&api-version=2: refused"
    assert mask_text(line) == (
        "Max retries exceeded with url: /v1/traces?token=***&api-version=2: refused"
    )
