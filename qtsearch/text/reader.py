"""Stream sentences out of text files, folders and .gz files, keeping where each came from.

Three layouts:
- lines (default): one sentence per line, a blank line between documents;
- running text (`split=True`): paragraphs separated by blank lines, split into sentences;
- WikiExtractor output (qtsearch.text.wikiextractor), recognised by its first line
  (`fmt="auto"`) or required (`fmt="wikiextractor"`): each article a document whose title, id
  and url (and the section heading above each sentence) travel with its sentences;
- records (qtsearch.text.records: JSON Lines, CSV/TSV, Parquet), recognised by the file name
  (`fmt="auto"`) or required (`fmt="records"`): each record a document of passages that keep
  its id and title.

How a corpus is read (`split`, `fmt`, `docs`, and how records are read) is one value,
`ReadOptions` (qtsearch.text.read_options). In text files a blank line ends a document
(`split=False`) or each file is one document (`split=True`, running text: blank lines end
paragraphs), unless `docs="paragraph"` makes each paragraph of running text a document of its
own. Each file starts a new document.

Messy input is repaired with a warning that names the file
and line (invalid UTF-8, NUL bytes, a byte-order mark, CRLF, over-long lines); input that
cannot be text (binary, truncated gzip, missing) raises `InputError`.
"""

from __future__ import annotations

import gzip
import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path

from qtsearch.core.errors import InputError
from qtsearch.text.limits import MAX_PARAGRAPH_CHARS, MAX_SENTENCE_CHARS
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.records import RECORD_SUFFIXES, is_records, read_records
from qtsearch.text.sentence import Sentence, SentenceRow
from qtsearch.text.splitter import split_sentences
from qtsearch.text.wikiextractor import Article, doc_tag, wiki_sentences

log = logging.getLogger("qtsearch")

#: File name endings read when a folder is given.
TEXT_SUFFIXES = (".txt", ".txt.gz", ".text", ".gz")
_WARN_LIMIT = 5
#: Bytes of one line read at a time.
LINE_CHUNK = 1 << 20


def list_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand folders (recursively, sorted, text endings only) and check every path exists and
    can be read: a folder that cannot be listed or a file that cannot be read is an input
    error naming it, never a silent gap in the index."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{p}: no such file or folder")
        if p.is_dir():
            found = sorted(f for f in _walk(p) if not f.name.startswith(".")
                           and f.name.lower().endswith(TEXT_SUFFIXES + RECORD_SUFFIXES))
            if not found:
                raise InputError(f"{p}: folder holds no text files ({', '.join(TEXT_SUFFIXES)})")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: not a regular file")
    if not files:
        raise InputError("no input files given")
    for f in files:
        if not os.access(f, os.R_OK):
            raise InputError(f"{f}: cannot be read (permission denied)")
    return files


def _walk(folder: Path) -> Iterator[Path]:
    """The regular files under `folder` (and its subfolders, not following links to folders,
    as `Path.rglob` does); a subfolder that cannot be listed raises InputError naming it."""

    def refuse(error: OSError) -> None:
        why = "permission denied" if isinstance(error, PermissionError) else error.strerror
        raise InputError(f"{error.filename}: cannot list this folder of the corpus ({why})")

    for root, _dirs, names in os.walk(folder, onerror=refuse):
        for name in names:
            path = Path(root) / name
            if path.is_file():
                yield path


def _open_binary(path: Path):
    try:
        fh = open(path, "rb")  # noqa: SIM115 - returned open; the caller closes it
    except PermissionError as e:
        raise InputError(f"{path}: cannot be read (permission denied)") from e
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from e
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    return fh


def _looks_binary(head: bytes) -> bool:
    """Text has almost no control bytes; images, archives and executables have many."""
    if not head:
        return False
    if head.count(b"\x00") > len(head) // 100 + 1:
        return True
    if len(head) < 512:  # too little to judge by control bytes
        return False
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return control > len(head) * 0.05


def _cut(raw: bytes) -> tuple[bytes, bytes]:
    """A line read up to LINE_CHUNK bytes: (what to yield now, what to carry into the next
    read). A whole line is yielded whole; a longer one is cut after its last white space (else
    before its last, maybe incomplete, UTF-8 character), so that no word is split."""
    if raw.endswith(b"\n") or len(raw) < LINE_CHUNK:
        return raw, b""
    space = max(raw.rfind(b" "), raw.rfind(b"\t"))
    if space > 0:
        return raw[: space + 1], raw[space + 1 :]
    start = len(raw) - 1
    while start > 0 and raw[start] & 0xC0 == 0x80:  # continuation bytes of a character
        start -= 1
    return (raw[:start], raw[start:]) if start > 0 else (raw, b"")


class _Lines:
    """Decoded, cleaned lines of one file with their 1-based numbers; warns on repairs. A line
    longer than LINE_CHUNK bytes comes in pieces of about that size with the same number, so
    that memory stays bounded on any input: splitting a whole line of hundreds of MB at once
    would take many times its size."""

    def __init__(self, path: Path):
        self.path = path
        self.warnings = 0

    def _warn(self, lineno: int, what: str) -> None:
        self.warnings += 1
        if self.warnings <= _WARN_LIMIT:
            log.warning("%s:%d: %s", self.path, lineno, what)
        elif self.warnings == _WARN_LIMIT + 1:
            log.warning("%s: more repairs in this file; further warnings suppressed", self.path)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        fh = _open_binary(self.path)
        try:
            try:
                head = fh.read(8192)
            except (OSError, EOFError, zlib.error) as e:
                raise InputError(f"{self.path}: corrupt or truncated gzip file ({e})") from e
            if _looks_binary(head):
                raise InputError(f"{self.path}: looks like a binary file, not text")
            fh.seek(0)
            lineno, carry, continued = 0, b"", False
            while True:
                try:
                    raw = carry + fh.readline(LINE_CHUNK)
                except (OSError, EOFError, zlib.error) as e:
                    raise InputError(
                        f"{self.path}: corrupt or truncated gzip file after line {lineno} ({e})"
                    ) from e
                if not raw:
                    break
                lineno += not continued
                raw, carry = _cut(raw)
                continued = bool(carry) or not raw.endswith(b"\n")
                if raw:
                    yield lineno, self._clean(lineno, raw)
                if continued and not carry and not raw:
                    break  # the file ended without a newline
        finally:
            fh.close()

    def _clean(self, lineno: int, raw: bytes) -> str:
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        raw = raw.rstrip(b"\r\n")
        if b"\x00" in raw:
            raw = raw.replace(b"\x00", b"")
            self._warn(lineno, "NUL bytes dropped")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            self._warn(lineno, "invalid UTF-8 bytes replaced with U+FFFD")
        return text


def _clip(lines: _Lines, lineno: int, text: str) -> str:
    if len(text) > MAX_SENTENCE_CHARS:
        lines._warn(
            lineno, f"sentence of {len(text):,} characters truncated to {MAX_SENTENCE_CHARS:,}"
        )
        return text[:MAX_SENTENCE_CHARS]
    return text


def clean_lines(stream: Iterable[bytes], name: str, keep_blank: bool = False) -> Iterator[str]:
    """The non-blank lines of a byte stream (standard input), repaired as file lines are:
    BOM, CRLF, NUL bytes, invalid UTF-8 and over-long lines, with warnings naming `name`.
    `keep_blank`: blank lines too (as ""), so outputs can line up with input lines."""
    lines = _Lines(Path(name))
    for lineno, raw in enumerate(stream, 1):
        text = lines._clean(lineno, raw).strip()
        if text:
            yield _clip(lines, lineno, text)
        elif keep_blank:
            yield ""


def _file_sentences_lines(lines: _Lines) -> Iterator[tuple[int, int, str]]:
    """(document break?, line, text) for one-sentence-per-line files."""
    new_doc, last = 1, 0
    for lineno, text in lines:
        text = text.strip()
        if lineno == last:  # more of a line already clipped to one sentence
            continue
        if not text:
            new_doc = 1
            continue
        yield new_doc, lineno, _clip(lines, lineno, text)
        new_doc, last = 0, lineno


def _file_sentences_split(lines: _Lines, paragraph_docs: bool = False
                          ) -> Iterator[tuple[int, int, str]]:
    """(document break?, line, text) for running text: paragraphs joined, then split into
    sentences (`paragraph_docs`: each paragraph starts a document)."""
    buf: list[str] = []
    starts: list[tuple[int, int]] = []  # (char offset in paragraph, line number)
    size = 0

    def flush() -> Iterator[tuple[int, int, str]]:
        para = " ".join(buf)
        k = 0
        brk = int(paragraph_docs)
        for off, sent in split_sentences(para):
            while k + 1 < len(starts) and starts[k + 1][0] <= off:
                k += 1
            yield brk, starts[k][1], _clip(lines, starts[k][1], sent)
            brk = 0
        buf.clear()
        starts.clear()

    for lineno, text in lines:
        text = text.strip()
        if not text:
            if buf:
                yield from flush()
                size = 0
            continue
        starts.append((size, lineno))
        buf.append(text)
        size += len(text) + 1
        if size > MAX_PARAGRAPH_CHARS:
            yield from flush()
            size = 0
    if buf:
        yield from flush()


def is_wikiextractor(path: str | os.PathLike) -> bool:
    """Whether the file's first non-blank line is a WikiExtractor `<doc id=… …>` line."""
    lines = iter(_Lines(Path(path)))
    try:
        first = next((text.strip() for _, text in lines if text.strip()), "")
    finally:
        lines.close()
    return doc_tag(first) is not None


def _file_sentences(path: Path, options: ReadOptions,
                    ) -> Iterator[tuple[int, int, str, Article | None, str | None]]:
    """(document break?, line, text, article, section) of one file read as `options` say."""
    fmt = options.fmt
    if fmt == "records" or (fmt == "auto" and is_records(path)):
        if not is_records(path):
            raise InputError(f"{path}: not a records file (its name must end in "
                             f"{', '.join(RECORD_SUFFIXES)})")
        record = 0
        for p in read_records(path, options.fields, options.passage_words):
            yield (p.record != record), p.record, p.text, Article(p.doc_id, None, p.title), None
            record = p.record
        return
    lines = _Lines(path)
    wiki = fmt != "text" and is_wikiextractor(path)
    if fmt == "wikiextractor" and not wiki:
        raise InputError(f"{path}: not WikiExtractor output (its first line is not "
                         f'<doc id="…" url="…" title="…">)')
    if wiki:
        yield from wiki_sentences(lines, partial(_clip, lines))
        return
    gen = (_file_sentences_split(lines, options.docs == "paragraph") if options.split
           else _file_sentences_lines(lines))
    for brk, lineno, text in gen:
        yield brk, lineno, text, None, None


def read_sentences(
    paths: Iterable[str | os.PathLike], split: bool = False, strict_empty: bool = True,
    options: ReadOptions | None = None,
) -> Iterator[Sentence]:
    """Yield every sentence (or record passage) of the corpus in reading order, read as
    `options` say (qtsearch.text.read_options; None: its defaults, running text as `split`
    says; with `options`, `split` stays False: they say it).

    Raises InputError for missing, binary or corrupt files, and (at the end) when the whole
    corpus holds no sentence. A named file with no sentence is an error when `strict_empty`.
    """
    for row in sentence_rows(paths, split, strict_empty, options):
        yield Sentence(*row)


def sentence_rows(
    paths: Iterable[str | os.PathLike], split: bool = False, strict_empty: bool = True,
    options: ReadOptions | None = None,
) -> Iterator[SentenceRow]:
    """`read_sentences`'s sentences as tuples of their fields (`SentenceRow`)."""
    if options is None:
        options = ReadOptions(split=split)
    elif split:
        raise ValueError("read_sentences: split is given by the options")
    options.check()
    files = list_files(paths)
    named = {Path(p) for p in paths if Path(p).is_file()}
    doc = -1
    total = 0
    for path in files:
        source = str(path)
        position = 0
        count = 0
        first = True
        for brk, lineno, text, article, section in _file_sentences(path, options):
            if first or brk:
                doc += 1
                position = 0
                first = False
            if article is None:
                yield text, source, lineno, doc, position, None, None, None, None
            else:
                yield (text, source, lineno, doc, position, article.title, article.url,
                       article.doc_id, section)
            position += 1
            count += 1
        if count == 0:
            if strict_empty and path in named:
                raise InputError(f"{path}: empty file (no sentences)")
            log.warning("%s: no sentences, skipped", path)
        total += count
    if total == 0:
        raise InputError("the corpus holds no sentences")
