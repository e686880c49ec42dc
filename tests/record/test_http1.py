"""The proxy's HTTP/1.1 framing (``client.http1``): a body reads the same however the network
splits it, ends exactly at its end, and keeps what comes after it; bad framing is an error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentload.client.http1 import MAX_HEAD, Body, HeadError, body_for, split_head


def _chunked(parts: list[bytes], *, ext: bool, trailers: bool) -> bytes:
    out = b""
    for p in parts:
        out += b"%x%s\r\n%s\r\n" % (len(p), b";name=v" if ext else b"", p)
    return out + b"0\r\n" + (b"x-trailer: 1\r\n" if trailers else b"") + b"\r\n"


def _feed(body: Body, data: bytes, cuts: list[int], lead: bytes = b"") -> bytes:
    """``data`` fed in pieces cut at ``cuts``; the first behind ``lead`` (a head read with
    it: ``feed(read, start)``)."""
    out = b""
    last = 0
    for c in [*sorted({min(c, len(data)) for c in cuts}), len(data)]:
        if last == 0:
            out += body.feed(lead + data[:c], len(lead))
        else:
            out += body.feed(data[last:c])
        last = c
    return out


@given(
    parts=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
    ext=st.booleans(),
    trailers=st.booleans(),
    extra=st.binary(max_size=20),
    lead=st.binary(max_size=30),
)
def test_a_chunked_body_reads_the_same_however_it_is_split(
    parts: list[bytes], cuts: list[int], ext: bool, trailers: bool, extra: bytes, lead: bytes
) -> None:
    body = Body(chunked=True)
    got = _feed(body, _chunked(parts, ext=ext, trailers=trailers) + extra, cuts, lead)
    assert got == b"".join(parts)
    assert body.done and body.extra == extra


@given(
    payload=st.binary(max_size=500),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8),
    extra=st.binary(max_size=20),
    lead=st.binary(max_size=30),
)
def test_a_sized_body_ends_at_its_length(
    payload: bytes, cuts: list[int], extra: bytes, lead: bytes
) -> None:
    body = Body(length=len(payload))
    assert body.wanted == len(payload)
    assert _feed(body, payload + extra, cuts, lead) == payload
    assert body.done and body.extra == extra and body.wanted == 0


def test_a_body_tells_how_many_bytes_it_still_wants_when_its_length_does() -> None:
    body = Body(length=10)
    body.feed(b"abcd")
    assert body.wanted == 6
    assert Body(chunked=True).wanted is None and Body(to_close=True).wanted is None


def test_framing_follows_the_head() -> None:
    data = b"POST /v1/x HTTP/1.1\r\nContent-Length: 3\r\nX-A:  b \r\n\r\nabc"
    got = split_head(data, request=True)
    assert got is not None
    head, n = got
    assert head.start == (b"POST", b"/v1/x", b"HTTP/1.1") and n == len(data) - 3
    assert head.get(b"x-a") == b"b"
    assert body_for(head, request=True).feed(b"abcd") == b"abc"
    chunked = split_head(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", request=False
    )
    assert chunked is not None and body_for(chunked[0], request=False).chunked
    bare = split_head(b"HTTP/1.1 200 OK\r\n\r\n", request=False)
    assert bare is not None and body_for(bare[0], request=False).to_close
    assert body_for(bare[0], request=True).done  # a request without a length has no body
    assert body_for(bare[0], request=False, no_body=True).done
    assert split_head(b"GET / HTTP/1.1\r\nHost: x\r\n", request=True) is None  # not all there yet


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"GET /\r\n\r\n", "bad request line"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", "bad header line"),
        (b"GET / HTTP/1.1\r\nx" + b"y" * MAX_HEAD, "head over"),
    ],
)
def test_a_bad_head_is_an_error(data: bytes, needle: str) -> None:
    with pytest.raises(HeadError, match=needle):
        split_head(data, request=True)


@pytest.mark.parametrize(
    ("data", "needle"),
    [(b"zz\r\n", "bad chunk size"), (b"2\r\nabc\r\n", "longer than its size")],
)
def test_bad_chunk_framing_is_an_error(data: bytes, needle: str) -> None:
    with pytest.raises(HeadError, match=needle):
        Body(chunked=True).feed(data)


def test_a_bad_content_length_is_an_error() -> None:
    got = split_head(b"POST / HTTP/1.1\r\ncontent-length: -4\r\n\r\n", request=True)
    assert got is not None
    with pytest.raises(HeadError, match="bad content-length"):
        body_for(got[0], request=True)


def test_a_head_read_whole_accepts_and_refuses_exactly_what_its_fields_read_one_by_one() -> None:
    """``split_head`` checks every field line with one pattern, and on a miss reads them one
    by one (``_field``) to say which and why: the two must agree on every line."""
    import random

    from agentload.client.http1 import HeadError, _field, split_head

    rng = random.Random(7)
    good = [b"a", b"Z", b"-", b"~", b"7"]
    odd = [b" ", b"\t", b"\x00", b"\x7f", b"\r", b"\x01", b"\xff", b":", b"(", b'"']

    def part(n: int) -> bytes:
        return b"".join(rng.choice(odd if rng.random() < 0.08 else good) for _ in range(n))

    verdicts = {True: 0, False: 0}
    for _ in range(3000):
        lines = [
            part(rng.randint(0, 4))
            + rng.choice([b":", b": ", b":\t", b""])
            + part(rng.randint(0, 6))
            for _ in range(rng.randint(1, 3))
        ]
        head = b"HTTP/1.1 200 OK\r\n" + b"\r\n".join(lines) + b"\r\n\r\n"
        try:
            for line in lines:
                _field(line)
            one_by_one: object = True
        except HeadError:
            one_by_one = False
        if head.find(b"\r\n\r\n") != len(head) - 4 or b"\n\n" in head:
            continue  # the head would end early: another test's matter
        try:
            split_head(head, request=False)
            whole: object = True
        except HeadError:
            whole = False
        assert whole == one_by_one, lines
        verdicts[whole] += 1
    assert min(verdicts.values()) > 500, verdicts  # both kinds of line were tried
