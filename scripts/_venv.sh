# ensure_venv DIR SPEC...: a virtualenv in DIR with `pip install SPEC...` done (sourced).
# Says what it does on stderr. The install is skipped when a stamp in DIR records the same
# SPEC, the same pyproject.toml and requirement files, and the same Python: an editable
# install follows source edits by itself, so re-runs start at once. DIFFSIM_SETUP_FORCE=1
# installs anyway.
ensure_venv() {
  local dir=$1; shift
  local py=${PYTHON:-python3}
  if [ ! -x "$dir/bin/python" ]; then
    echo "setup: creating the virtualenv $dir ($("$py" --version 2>&1))" >&2
    "$py" -m venv "$dir"
  fi
  local inputs=(pyproject.toml)
  local arg
  for arg in "$@"; do  # requirement files named with -r
    [ -f "$arg" ] && inputs+=("$arg")
  done
  local stamp
  stamp=$({ echo "$*"; "$dir/bin/python" --version; cat "${inputs[@]}"; } | sha256sum | cut -c1-16)
  local stampfile="$dir/.diffsim-setup-$stamp"
  if [ -f "$stampfile" ] && [ "${DIFFSIM_SETUP_FORCE:-0}" != 1 ]; then
    echo "setup: $dir is up to date for pip install $* (pyproject.toml unchanged; DIFFSIM_SETUP_FORCE=1 reinstalls)" >&2
    return 0
  fi
  echo "setup: pip install $* into $dir (on a fresh machine this downloads a few hundred MiB: minutes)" >&2
  local start=$SECONDS
  "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$dir/bin/python" -m pip install -q "$@"
  touch "$stampfile"
  echo "setup: done in $((SECONDS - start)) s" >&2
}
