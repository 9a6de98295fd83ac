#!/bin/sh
# Installs ahpd: the binaries built by `make build`, the systemd units and an
# example config. `make install` runs it; packagers set DESTDIR.
#
#   PREFIX      install prefix (default /usr/local)
#   BINDIR      binaries (default $PREFIX/bin)
#   UNITDIR     system units (default $PREFIX/lib/systemd/system)
#   USERUNITDIR user units (default $PREFIX/lib/systemd/user)
#   SYSCONFDIR  where ahpd/config.toml goes (default /etc)
#   DATADIR     the example config (default $PREFIX/share)
#   DESTDIR     staging root prepended to every path above (default empty)
#   BUILDDIR    where ahpd and ahpctl were built (default bin, as make build does)
#
# Installs ahpd and ahpctl to BINDIR; ahpd@.service and ahpd@.socket
# to UNITDIR; ahpd.user.service and ahpd.user.socket to USERUNITDIR as
# ahpd.service and ahpd.socket; the example config to
# DATADIR/ahpd/config.example.toml, and to SYSCONFDIR/ahpd/config.toml unless
# a config is already there (it is never overwritten). Unit files get BINDIR
# and SYSCONFDIR substituted. It does not enable or start anything.
set -eu

cd "$(dirname "$0")"
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
USERUNITDIR=${USERUNITDIR:-$PREFIX/lib/systemd/user}
SYSCONFDIR=${SYSCONFDIR:-/etc}
DATADIR=${DATADIR:-$PREFIX/share}
DESTDIR=${DESTDIR:-}
BUILDDIR=${BUILDDIR:-bin}

for f in "$BUILDDIR/ahpd" "$BUILDDIR/ahpctl"; do
	if [ ! -x "$f" ]; then
		echo "install.sh: $f is missing: run 'make build' first (as yourself, not root)" >&2
		exit 1
	fi
done
for d in "$PREFIX" "$BINDIR" "$UNITDIR" "$USERUNITDIR" "$SYSCONFDIR" "$DATADIR"; do
	case $d in
	/*) ;;
	*) echo "install.sh: $d: paths must be absolute (DESTDIR is the staging root)" >&2; exit 1 ;;
	esac
done

# unit SRC DEST: copy a unit with the install paths substituted.
unit() {
	sed -e "s|/usr/local/bin/|$BINDIR/|g" -e "s|/etc/ahpd/|$SYSCONFDIR/ahpd/|g" "$1" >"$2.tmp"
	chmod 0644 "$2.tmp"
	mv -f "$2.tmp" "$2"
	echo "installed $2"
}

install -d -m 0755 "$DESTDIR$BINDIR" "$DESTDIR$UNITDIR" "$DESTDIR$USERUNITDIR" \
	"$DESTDIR$DATADIR/ahpd" "$DESTDIR$SYSCONFDIR/ahpd"
for b in ahpd ahpctl; do
	install -m 0755 "$BUILDDIR/$b" "$DESTDIR$BINDIR/$b"
	echo "installed $DESTDIR$BINDIR/$b"
done
unit systemd/ahpd@.service "$DESTDIR$UNITDIR/ahpd@.service"
unit systemd/ahpd@.socket "$DESTDIR$UNITDIR/ahpd@.socket"
unit systemd/ahpd.user.service "$DESTDIR$USERUNITDIR/ahpd.service"
unit systemd/ahpd.user.socket "$DESTDIR$USERUNITDIR/ahpd.socket"
install -m 0644 systemd/config.example.toml "$DESTDIR$DATADIR/ahpd/config.example.toml"
echo "installed $DESTDIR$DATADIR/ahpd/config.example.toml"
conf=$DESTDIR$SYSCONFDIR/ahpd/config.toml
if [ -e "$conf" ]; then
	echo "kept $conf (the current example is $DESTDIR$DATADIR/ahpd/config.example.toml)"
else
	install -m 0644 systemd/config.example.toml "$conf"
	echo "installed $conf"
fi

if [ -z "$DESTDIR" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
cat <<MSG

Next (see README.md, "Run as a service"):
  sudo systemctl enable --now ahpd@\$USER.service         # system manager, terminals run as \$USER
  systemctl --user enable --now ahpd.service              # or: your user manager
MSG
