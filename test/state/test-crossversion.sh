#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A real re-exec across versions: the program of from-commit (built from this
# repository's history by build-old-broker.sh, cached) runs every bus of
# test_reexec.py's cross-version cases with clients connected, and its
# SIGUSR2 executes the program under test, which must take the old state and
# serve on with every assertion of those cases.
#
#   test-crossversion.sh SOURCE_DIR BUS_BINARY
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR BUS_BINARY}
bin=${2:?usage: $0 SOURCE_DIR BUS_BINARY}
commit=$(cat "$src/test/state/from-commit")
old=$("$src/test/state/build-old-broker.sh" "$src" "$commit")
echo "old program: $old (commit $commit)"
exec /usr/bin/python3 "$src/test/integration/test_reexec.py" "$bin" --from "$old"
