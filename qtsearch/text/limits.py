"""How much text one piece of input may hold, so that no line, paragraph or record can blow
up memory or the tokeniser; what passes a limit is cut with a warning that counts it."""

#: Longest sentence kept, in characters: far beyond any `max_len` in tokens, short enough that a
#: 10 MB line cannot blow up memory or the tokeniser.
MAX_SENTENCE_CHARS = 10_000
#: A paragraph of running text is split early once it grows past this many characters.
MAX_PARAGRAPH_CHARS = 1_000_000
#: Longest record text kept, in characters (a long article, beyond any BEIR document); its
#: sentences are then cut at MAX_SENTENCE_CHARS like text lines, and so is its title.
MAX_RECORD_CHARS = 1_000_000
