#!/usr/bin/env bash
# Every path of the repository that README.md, docs/*.md, fuzz/README.md and the bench
# results (or the files given) name must exist: paths in backticks that start with a
# top-level folder of the tree (buffer/, reactor/, pipeline/, ..., docs/, bench/, tests/), file
# names under those folders anywhere in the text, and the targets of relative Markdown links.
# Build trees (build/...), files .gitignore lists (bench/results.json: make bench writes it),
# globs, placeholders (<name>, NAME) and URLs are not paths here.
# Prints each missing one as FILE:LINE: PATH and exits 1 if any is missing.
#
#   bash scripts/doc_paths.sh [FILE...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [[ $# -eq 0 ]]; then
    set -- README.md docs/*.md fuzz/README.md bench/RESULTS.md bench/ring/RESULTS-ring.md
fi
tops='buffer|reactor|pipeline|bootstrap|codec|include|examples|tests|bench|fuzz|scripts|docs|cmake'
exts='(c|h|md|sh|py|cmake|txt|gp|java|hex|zone|lua|in|png)'
list=$(mktemp)
trap 'rm -f "$list"' EXIT
missing=0
for f in "$@"; do
    dir=$(dirname "$f")
    # backticked paths, and file names anywhere: FILE:LINE:PATH:.
    {
        grep -noE "\`($tops)/[^\` ]*\`" "$f" | sed -E 's/`//g'
        grep -noE "(^|[^A-Za-z0-9_./-])($tops)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.$exts\b" "$f" |
            sed -E 's/:[^A-Za-z0-9_]?/:/'
    } | while IFS=: read -r line path _; do echo "$f:$line:$path:."; done
    # relative links: [text](path#anchor), resolved against the file's folder
    grep -noE '\]\([^)# ]+(#[^)]*)?\)' "$f" | sed -E 's/\]\(([^)#]*).*/\1/' |
        grep -vE ':(https?|mailto):' |
        while IFS=: read -r line path; do echo "$f:$line:$path:$dir"; done
done 2>/dev/null | sort -u >"$list" || true
while IFS=: read -r file line path base; do
    case $path in
    *'<'* | *'*'* | *'{'* | *NAME* | *'...'*) continue ;; # placeholders and globs
    esac
    path=${path%%#*}
    path=${path%.}  # a path that ends a sentence
    path=${path%,}
    [[ -n $path ]] || continue
    if [[ $base != . ]]; then
        path=$base/$path
    fi
    if [[ ! -e $path ]] && ! grep -qxF "$path" .gitignore; then
        echo "$file:$line: $path"
        missing=1
    fi
done <"$list"
exit $missing
