# Sourced by the recipes: the Gutenberg training books (0000–0739). Books 0740–0757 are held out
# for next-sentence retrieval in `qtsearch eval`.
DATA="${QTSEARCH_DATA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/data}/gutenberg"
BOOKS=("$DATA"/0[0-6]*.txt.gz "$DATA"/07[0-3]*.txt.gz)
