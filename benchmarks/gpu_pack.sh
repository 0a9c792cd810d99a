#!/usr/bin/env bash
# What a session lent a GPU carries to the device machine for `gpu_check.sh`: spaCy, gensim and
# what they need that the machine's image lacks (see /work/.library/device/KINDS.md), built for
# its CPython 3.12 on x86-64, in one archive, .gpu/site.tar.xz (git-ignored).
#
# Versions: those installed where this runs (the ones the test suite passed with). The wheels
# as published are 85 MB, over the 64 MiB a call carries: their compiled modules keep their
# debug symbols (spaCy's 118 MB of them unpacked), which are stripped here, and the test suites
# are dropped, save the gensim test data the benchmarks read.
#
# Usage (from the repository root, with the project's virtual environment active):
#     bash benchmarks/gpu_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."

CARRIED='spacy|spacy-legacy|spacy-loggers|thinc|blis|cymem|preshed|murmurhash|srsly|wasabi'
CARRIED+='|weasel|catalogue|confection|pydantic|pydantic-core|annotated-types|typing-inspection'
CARRIED+='|smart-open|cloudpathlib|gensim'
# Newer than the image may hold: pydantic needs typing-extensions >= 4.16, spaCy click >= 8.2.1.
CARRIED+='|typing-extensions|click'
# The gensim test data the benchmarks read (gensim_corpus.py, quality.py, doc_similarity.py).
TEST_DATA=(
    enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2
    lee_background.cor lee.cor similarities0-1.txt simlex999.txt wordsim353.tsv
)

mapfile -t pins < <(
    python -m pip freeze --all | tr '_' '-' | grep -i -E "^(${CARRIED})==" || true
)
missing=()
for name in $(tr '|' ' ' <<<"$CARRIED"); do
    grep -q -i -x "${name}==.*" < <(printf '%s\n' "${pins[@]}") || missing+=("$name")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "gpu_pack.sh: $(command -v python) lacks ${missing[*]}; activate the project's" \
        "virtual environment (README, Development)" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platforms=()
for tag in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
python -m pip install --quiet --no-deps --no-compile --only-binary=:all: \
    --python-version 3.12 --implementation cp "${platforms[@]}" \
    --target "$work/site" "${pins[@]}" 2> >(grep -v '^WARNING: Location' >&2)

site="$work/site"
find "$site" -depth -type d -name tests -prune -exec rm -rf {} +
# gensim's test package stays (its utils.datapath finds the data), less its tests and most data.
rm -f "$site"/gensim/test/test_*.py
data="$site/gensim/test/test_data"
mv "$data" "$work/all_data"
mkdir "$data"
for name in "${TEST_DATA[@]}"; do
    mv "$work/all_data/$name" "$data/"
done
find "$site" -name '*.so' -exec strip --strip-debug {} +

mkdir -p .gpu
tar -C "$site" -cJf .gpu/site.tar.xz .
echo "$(du -h .gpu/site.tar.xz | cut -f1) .gpu/site.tar.xz: ${pins[*]}"
