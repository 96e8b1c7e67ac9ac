"""Search terms another term of the same write covers are not stored (DESIGN.md section 6.8): a
search matches a run by the start of one of its terms, so a term that starts another one finds
nothing more, and one text stored under two kinds is one row."""

from __future__ import annotations

from runtime.core.search_text import INTENT_EVENT, events_terms, intent_terms, terms_covered


def _intent(message: str, *paths: str) -> dict:
    return {"idempotency_key": "rk1_00ff", "action": {"kind": "commit", "target": "", "params": {
        "message": message, "changes": [{"op": "write", "path": p, "content": "sha256:" + "0" * 64}
                                        for p in paths]}}}


def test_it_finds_the_terms_another_term_starts_with() -> None:
    terms = ["fix", "fix the lease renewal", "src", "src/app.py", "lease", "leases.md", "zebra", "app.py"]

    assert terms_covered(terms) == {"fix", "src", "lease"}


def test_it_sees_a_covered_term_past_the_terms_sorted_between() -> None:
    assert terms_covered(["ab", "abc", "abd", "b"]) == {"ab"}
    assert terms_covered(["ab", "ab"]) == set(), "the same text twice covers nothing: it is one term"


def test_a_stored_write_finds_everything_its_full_terms_find() -> None:
    payload = _intent("Fix the lease\n\nleases expire; renew them.\n", "docs/leases.md", "src/lease.py")

    stored = [term for _, term in events_terms([(INTENT_EVENT, payload)])]
    full = [term for _, term in intent_terms(payload)]

    assert len(stored) < len(full), "the first line covers its first word, a file name the word it starts with"
    assert len(stored) == len(set(stored)), "one row per text, whatever kinds it came from"
    for term in full:
        for cut in range(1, len(term) + 1):
            typed = term[:cut]
            assert any(s.startswith(typed) for s in stored), f"{typed!r} would no longer find the run"


def test_it_keeps_one_row_for_a_text_two_kinds_give() -> None:
    payload = _intent("release\n", "release")

    stored = events_terms([(INTENT_EVENT, payload)])

    assert [term for _, term in stored].count("release") == 1
