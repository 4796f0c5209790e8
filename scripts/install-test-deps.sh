#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian/Ubuntu machine:
# system tools (speech synthesizers for the recipe smoke test and test audio, sox,
# PortAudio + PulseAudio for the microphone tests, Chromium for the captioning page's) and
# the package with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
# espeak-ng, flite, sox: test audio and the recipe smoke test; fortunes, fortunes-min,
# wamerican: the recipe's training text (recipes/synthetic-en/make_text.py reads them);
# libportaudio2, pulseaudio, pulseaudio-utils (paplay, pactl), libasound2-plugins (the
# ALSA "pulse" device): the microphone tests capture a PulseAudio null sink's monitor;
# chromium (driven by Playwright from the test extra: never a browser it downloads) and
# fonts-dejavu-core (the page's text in its screenshots): the captioning page's tests.
# pocketsphinx-testdata, alsa-utils (/usr/share/sounds/alsa): real speech, the real-voice
# benchmark's dev set (bench/accuracy/realvoice.py; its smoke test reads two files).
# nginx: the shipped reverse proxy config (examples/deploy/nginx.conf) is run in a real
# nginx in front of the server (tests/test_deploy_nginx.py); systemd: systemd-analyze
# checks the shipped service unit (examples/deploy/streamdec.service).
# postgresql: the transcript store's tests start a real PostgreSQL server (initdb, pg_ctl;
# as root they run it as the package's postgres user: tests/postgres_utils.py).
PKGS="espeak-ng flite sox libsox-fmt-all libsndfile1 fortunes fortunes-min wamerican
      libportaudio2 pulseaudio pulseaudio-utils libasound2-plugins chromium fonts-dejavu-core
      pocketsphinx-testdata alsa-utils nginx systemd postgresql"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# torch is pinned (a CPU wheel of 2.13.0 is what the project trains and tests with).
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
