#!/usr/bin/env bash
# Run the libFuzzer targets built in BUILD_DIR (make fuzz), one after the other, each for
# SECONDS, starting from the committed corpus (fuzz/corpus_<name>.hex, unpacked into
# BUILD_DIR/corpus_<name>/). Crashes go to BUILD_DIR/artifacts_<name>/. Afterwards the grown
# corpus is packed into BUILD_DIR/corpus_<name>.hex: to keep new inputs, minimise and copy it
# over fuzz/ (fuzz/README.md).
#   bash fuzz/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=${1:?usage: bash fuzz/run.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
status=0
for name in http http_response resp store frame dns ws http2 http_coding; do
    if [ ! -x "$build/fuzz/fuzz_$name" ]; then
        echo "== fuzz_$name: not built here (fuzz_http2 needs nghttp2, fuzz_http_coding zlib," \
            "libbrotli and libzstd), skipped"
        continue
    fi
    corpus=$build/corpus_$name artifacts=$build/artifacts_$name
    mkdir -p "$corpus" "$artifacts"
    python3 "$here/corpus.py" unpack "$here/corpus_$name.hex" "$corpus"
    echo "== fuzz_$name: ${seconds}s from $(find "$corpus" -type f | wc -l) inputs"
    if ! "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus"; then
        echo "fuzz_$name found a problem: see $artifacts/ (replay one with $build/fuzz/fuzz_$name FILE)"
        status=1
    fi
    python3 "$here/corpus.py" pack "$corpus" "$build/corpus_$name.hex"
done
exit $status
