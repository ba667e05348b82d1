"""Shortening a message to fit a line, a table cell or a report field, never mid-word.

Every place that bounds a message (a rank's last log line, a summary's failure cell, a tool's
stderr, a failure's long representation) cuts it here: at the last space before the limit, with
an ellipsis saying that something was left out, so a reader never sees "all 2 ranks w" or
"--rocm-baseli" and takes it for the whole text.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its beginning cut at a word boundary and
    ended by an ellipsis (the whole is at most `limit` characters)."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 0)
    head = text[:room]
    if room < len(text) and not text[room].isspace() and " " in head:
        head = head[: head.rindex(" ")]
    return head.rstrip() + ELLIPSIS


def clip_start(text: str, limit: int) -> str:
    """`text` if it fits, else its end, begun at a line or word boundary after an ellipsis: for
    a failure's representation, whose last lines say what failed."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 0)
    tail = text[len(text) - room :]
    cut = len(text) - room
    if cut > 0 and not text[cut - 1].isspace():
        newline, space = tail.find("\n"), tail.find(" ")
        boundary = newline if newline >= 0 else space
        if boundary >= 0:
            tail = tail[boundary + 1 :]
    return ELLIPSIS + tail
