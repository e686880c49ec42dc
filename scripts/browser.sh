#!/usr/bin/env bash
# A headless browser for the report's browser test: Debian's chromium and chromedriver.
#
# Usage: scripts/browser.sh install   # apt-get them once (root); a no-op when both already run
#
# Both come from Debian's packages (nothing else is downloaded); the test drives them through
# selenium (a test dependency) with /usr/bin/chromedriver, so selenium never fetches a driver.
# A failure is one line on stderr and exit 1.
set -euo pipefail
log() { echo "browser.sh: $*" >&2; }

works() {
  chromium --version >/dev/null 2>&1 && chromedriver --version >/dev/null 2>&1
}

case "${1:-}" in
  install)
    if works; then
      log "$(chromium --version 2>/dev/null | tail -1), $(chromedriver --version | cut -d' ' -f1-2)"
      exit 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
      log "error: chromium is not installed and cannot be here (needs root + apt-get)"; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; } >/tmp/agentload-browser.log 2>&1; then
      log "error: apt-get install chromium chromium-driver failed: $(tail -1 /tmp/agentload-browser.log)"; exit 1
    fi
    works || { log "error: chromium or chromedriver does not run after the install"; exit 1; }
    log "installed $(chromium --version 2>/dev/null | tail -1)"
    ;;
  *)
    echo "usage: scripts/browser.sh install" >&2; exit 2 ;;
esac
