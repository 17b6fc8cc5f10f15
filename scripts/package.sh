#!/usr/bin/env bash
# Builds the Debian package of this checkout: dist/proximityd_<version>_<arch>.deb, for this
# machine's architecture (amd64 here; arm64 on an arm64 box with the Swift toolchain, which is all
# it needs besides Debian's packages: docs/install.md).
#
#   scripts/package.sh [--dbgsym]
#     --dbgsym   also dist/proximityd-dbgsym_<version>_<arch>.deb, the binaries' debug symbols
#
# The version is the VERSION file's, which the binaries' --version prints too; debian/changelog's
# newest entry must name the same version. The build is debian/rules (debhelper): release builds
# linked with -static-stdlib, so that the package needs no Swift toolchain, only the Debian
# libraries it declares (Depends: is computed by dpkg-shlibdeps). Then install it with
#   sudo apt install ./dist/proximityd_<version>_<arch>.deb
set -euo pipefail
cd "$(dirname "$0")/.."

dbgsym=false
for arg in "$@"; do
  case "$arg" in
    --dbgsym) dbgsym=true ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown argument $arg (usage: scripts/package.sh [--dbgsym])" >&2; exit 64 ;;
  esac
done

source scripts/setup.sh   # the build's Debian packages, and the Swift toolchain on PATH
ensure_debian_packages package.sh debhelper dpkg-dev fakeroot

version="$(head -n 1 VERSION)"
changelog="$(dpkg-parsechangelog -S Version)"
if [ "$version" != "$changelog" ]; then
  echo "package.sh: VERSION says $version but debian/changelog's newest entry is $changelog;" >&2
  echo "  add an entry for $version (dch -v $version, from devscripts), then run this again" >&2
  exit 65
fi
arch="$(dpkg --print-architecture)"
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "package.sh: note: the work tree has uncommitted changes; they are in the package" >&2
fi

dpkg-checkbuilddeps
if ! $dbgsym; then
  DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }noddebs"
fi
export DEB_BUILD_OPTIONS
mkdir -p dist
rm -f "dist/proximityd_${version}_${arch}.deb" "dist/proximityd-dbgsym_${version}_${arch}.deb"
started=$SECONDS
debian/rules clean
debian/rules build
fakeroot debian/rules binary
deb="dist/proximityd_${version}_${arch}.deb"
[ -s "$deb" ] || { echo "package.sh: debian/rules binary made no $deb" >&2; exit 1; }
echo "package.sh: built $deb ($(du -h "$deb" | cut -f1), $((SECONDS - started)) s)"
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends
