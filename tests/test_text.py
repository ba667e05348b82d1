"""Messages shortened to fit a line or a cell are cut at a word boundary and say so."""

from __future__ import annotations

import pytest

from rocm_validate.text import ELLIPSIS, clip, clip_start

RENDEZVOUS = (
    "rocm-validate collectives: rank 1 of 2 could not join the rendezvous at 127.0.0.1:29500 within 20 s "
    "(RuntimeError: connection refused). Check MASTER_ADDR / MASTER_PORT (torchrun: --rdzv-endpoint), that the "
    "port is open between the nodes, and that all 2 ranks were started"
)


@pytest.mark.parametrize("limit", [20, 75, 120, 250])
def test_a_clipped_message_ends_on_a_whole_word_and_an_ellipsis(limit: int) -> None:
    shown = clip(RENDEZVOUS, limit)
    assert len(shown) <= limit and shown.endswith(ELLIPSIS)
    kept = shown.removesuffix(ELLIPSIS)
    assert RENDEZVOUS.startswith(kept) and RENDEZVOUS[len(kept)] == " "


def test_a_message_that_fits_is_left_whole() -> None:
    assert clip(RENDEZVOUS, len(RENDEZVOUS)) == RENDEZVOUS
    assert clip_start(RENDEZVOUS, len(RENDEZVOUS)) == RENDEZVOUS


def test_the_end_of_a_long_failure_is_kept_from_a_line_boundary() -> None:
    text = "first line of a long traceback\n" * 50 + "E   AssertionError: the part that says what failed"
    shown = clip_start(text, 100)
    assert shown.startswith(ELLIPSIS + "first line") and shown.endswith("says what failed") and len(shown) <= 100


def test_a_rank_log_line_is_never_cut_mid_word(tmp_path) -> None:
    from rocm_validate.collectives.launch import _last_line

    log = tmp_path / "rank1.log"
    log.write_text("starting\n" + RENDEZVOUS + " " + "and more words to push it past the limit " * 4 + "\n")
    shown = _last_line(log)
    assert shown.endswith("…") and " w…" not in shown and len(shown) <= 300
