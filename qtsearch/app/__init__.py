"""The ways in: the only code that parses argv or prints. `cli` (entry point, one-line errors
and exit codes), `commands/` (one module per command), `shell`, `serve/` (HTTP API and page),
`demo/`, and the Rich progress display behind the library's progress callbacks."""
