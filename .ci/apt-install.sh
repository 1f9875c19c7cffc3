# Sourced by the .ci/install-*.sh scripts: `apt_install NAME PACKAGE...` runs apt-get update and install
# quietly (through sudo when not root) and, when that fails, prints the tail of apt's log and
# "install-NAME: apt-get install PACKAGE... failed" on stderr and exits 1.
apt_install() {
  local name=$1; shift
  local sudo="" log
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  log="$(mktemp)"
  if ! { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq && \
         DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    echo "install-$name: apt-get install $* failed (see above)" >&2
    exit 1
  fi
  rm -f "$log"
}
