"""Head+tail truncation and test-output normalisation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentload.tools import normalise_test_output, truncate_head_tail


@given(st.text(alphabet="ab\n", max_size=3000), st.integers(min_value=100, max_value=2000))
def test_truncation_keeps_head_and_tail_within_budget(text: str, limit: int) -> None:
    out, cut = truncate_head_tail(text, limit)
    assert len(out) <= limit
    if not cut:
        assert out == text
    else:
        head, _, rest = out.partition("[... ")
        marker, _, tail = rest.partition(" characters omitted ...]\n")
        head = head.removesuffix("\n") if not text.startswith(head) else head
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) + int(marker) + len(tail) == len(text)


def test_normalisation() -> None:
    raw = (
        'File "/tmp/x/ws/email/a.py", line 3\n'
        "<Foo object at 0x7f3a2b1c9d80>\n"
        "Ran 12 tests in 0.734s\n"
        "========= 2 failed, 10 passed in 1.23s =========\n"
    )
    assert normalise_test_output(raw, "/tmp/x/ws") == (
        'File "/workspace/email/a.py", line 3\n'
        "<Foo object at 0x0>\n"
        "Ran 12 tests\n"
        "========= 2 failed, 10 passed =========\n"
    )
    assert normalise_test_output("Ran 1 test in 0.000s", "/workspace") == "Ran 1 test"
