"""The rows of one records file (JSON Lines, CSV/TSV, Parquet), each with the line it starts
on, read in bounded memory: a JSON line longer than LINE_BYTES is read in pieces and each of
its strings kept only up to STRING_BYTES, so a 200 MB record never exists whole in memory;
a CSV field may not pass FIELD_BYTES (a quote left open would otherwise swallow the rest of
the file into one record)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from qtsearch.core.errors import InputError
from qtsearch.text.limits import MAX_RECORD_CHARS

#: Bytes of a JSON line read at a time; a longer line is read in pieces of this size.
LINE_BYTES = 1 << 20
#: Bytes of each string of an over-long JSON line kept: enough for MAX_RECORD_CHARS
#: characters even where every one is written as a surrogate-pair escape (12 bytes).
STRING_BYTES = 12 * (MAX_RECORD_CHARS + 1)
#: What an over-long JSON line may still hold once its strings are cut (its structure:
#: field names, numbers, brackets); beyond it the record is an InputError.
SHRUNK_BYTES = 64 << 20
#: Longest CSV/TSV field: a record's text, cut to MAX_RECORD_CHARS later, fits many times over.
FIELD_BYTES = 16 << 20
_SPECIAL = re.compile(rb'["\\]')


def _open(path: Path) -> IO[bytes]:
    raw = open(path, "rb")  # noqa: SIM115 - returned open; the caller closes it
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    raw.seek(0)
    return raw


class _Shrinker:
    """Copies a JSON text fed in pieces, keeping at most `keep` bytes of each string (cut
    before an escape or a UTF-8 character that would not fit whole). Scans with a regular
    expression, so a 200 MB string costs a few C-speed searches, not a Python loop a byte."""

    def __init__(self, keep: int = STRING_BYTES):
        self.keep = keep
        self.out = bytearray()
        self.in_string = False
        self.escape = False  # the previous piece ended on a backslash inside a string
        self.kept = 0  # bytes of the current string written
        self.cut = False  # some string was cut

    def feed(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            if not self.in_string:
                q = data.find(b'"', i)
                end = len(data) if q < 0 else q + 1
                self.out += data[i:end]
                self.in_string, self.kept, i = q >= 0, 0, end
                continue
            if self.escape:  # the escaped byte (a \uXXXX's hex digits are plain bytes)
                self._content(data[i:i + 1])
                self.escape, i = False, i + 1
                continue
            m = _SPECIAL.search(data, i)
            j = len(data) if m is None else m.start()
            self._content(data[i:j])
            if m is None:
                return
            if data[j:j + 1] == b"\\":
                self._content(b"\\")
                self.escape, i = True, j + 1
            else:
                self._close()
                self.in_string, i = False, j + 1
        if len(self.out) > SHRUNK_BYTES:
            raise OverflowError

    def _content(self, piece: bytes) -> None:
        room = self.keep - self.kept
        if len(piece) > room:
            self.cut = True
            piece = piece[:max(room, 0)]
        self.out += piece
        self.kept += len(piece)

    def _close(self) -> None:
        if self.kept >= self.keep:  # maybe cut: end it whole
            start = len(self.out) - self.kept
            del self.out[start + len(_whole(bytes(self.out[start:]))):]
        self.out += b'"'


def _whole(content: bytes) -> bytes:
    """A cut string's content without a tail that would not decode: half an escape, a high
    surrogate left without its pair, or the first bytes of a UTF-8 character."""
    b = content.rfind(b"\\", max(len(content) - 6, 0))
    # the last backslash starts an escape when an odd run of them ends there (an even run is
    # escaped backslashes, all whole)
    if b >= 0 and (b + 1 - len(content[:b + 1].rstrip(b"\\"))) % 2:
        esc = content[b:b + 6]
        whole = len(esc) >= 2 and (esc[1:2] != b"u" or len(esc) == 6)
        lone = esc[1:2] == b"u" and esc[2:4].lower() in (b"d8", b"d9", b"da", b"db")
        if not whole or (lone and b + 6 == len(content)):
            return _whole(content[:b])
    for k in range(1, min(4, len(content)) + 1):
        byte = content[-k]
        if byte >= 0xC0:  # a lead byte: how many bytes its character has
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return content[:-k] if need > k else content
        if byte < 0x80:
            break
    return content


def _json_line(fh: IO[bytes], first: bytes, path: Path, lineno: int) -> tuple[bytes, bool]:
    """One whole JSON line starting with `first`: as read when short, else shrunk."""
    if first.endswith(b"\n") or len(first) < LINE_BYTES:
        return first, False
    shrink = _Shrinker()
    piece = first
    try:
        while piece:
            shrink.feed(piece)
            if piece.endswith(b"\n"):
                break
            piece = fh.readline(LINE_BYTES)
    except OverflowError:
        raise InputError(f"{path}:{lineno}: a record of over {SHRUNK_BYTES >> 20} MB even "
                         "with each string cut; split it") from None
    return bytes(shrink.out), shrink.cut


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with _open(path) as fh:
        lineno = 0
        while first := fh.readline(LINE_BYTES):
            lineno += 1
            raw, _ = _json_line(fh, first, path, lineno)
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{lineno}: not a JSON object ({e.msg})") from e
            if not isinstance(row, dict):
                raise InputError(f"{path}:{lineno}: a record must be a JSON object, not "
                                 f"{type(row).__name__}")
            yield lineno, row


class _Kept:
    """A file's lines as the CSV reader takes them, the current record's kept aside."""

    def __init__(self, fh: IO[str]):
        self.fh = fh
        self.lines: list[str] = []

    def __iter__(self) -> _Kept:
        return self

    def __next__(self) -> str:
        line = next(self.fh)
        self.lines.append(line)
        return line


def _left_open(lines: list[str], delimiter: str) -> bool:
    """Whether the record of these lines ends inside a quoted field. Parsing stays lenient
    (a quote inside an unquoted-looking field, common in TSV, is text), so the last record
    is parsed once more, strictly, to tell a quote left open at the end of the file."""
    try:
        for _ in csv.reader(lines, delimiter=delimiter, strict=True):
            pass
    except csv.Error as e:
        return "end of data" in str(e)
    return False


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any]]]:
    csv.field_size_limit(FIELD_BYTES)
    with io.TextIOWrapper(_open(path), encoding="utf-8-sig", errors="replace",
                          newline="") as fh:
        kept = _Kept(fh)
        rows = csv.DictReader(kept, delimiter=delimiter)
        start = last_start = 2  # the line after the header
        last: list[str] = []
        try:
            for row in rows:
                last, last_start, kept.lines = kept.lines, start, []
                yield start, row
                start = rows.line_num + 1
        except csv.Error as e:  # a field past FIELD_BYTES: most often a quote left open
            raise InputError(f"{path}:{start}: a field of over {FIELD_BYTES >> 20} MB (a "
                             f"quote left open?): {e}") from e
        if last and _left_open(last, delimiter):
            raise InputError(f"{path}:{last_start}: a quoted field is never closed (it runs "
                             "to the end of the file)")


def rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line the record starts on, record) for every record of one file, in file order
    (Parquet: the row's number, 1-based)."""
    name = path.name.lower().removesuffix(".gz")
    try:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            n = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
                for row in batch.to_pylist():
                    n += 1
                    yield n, row
        elif name.endswith((".csv", ".tsv")):
            yield from _csv_rows(path, "\t" if name.endswith(".tsv") else ",")
        else:
            yield from _jsonl_rows(path)
    except InputError:
        raise
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot be read as records ({e})") from e
    except Exception as e:  # pyarrow's own errors: one line naming the file
        raise InputError(f"{path}: cannot be read as records ({type(e).__name__}: {e})") from e
